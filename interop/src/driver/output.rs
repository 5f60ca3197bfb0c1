//! The JVM's output: its stdout read for the ready line and the replies, each handed to the
//! request waiting for it, and the tail of its stderr kept to show in a failure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::oneshot;

use super::reply::parse_ready;
use super::{Ready, Reply};

/// How much of the JVM's stderr is kept to show in a failure (its tail).
const STDERR_KEPT: usize = 32 * 1024;

/// What the reader tasks share with the handle.
#[derive(Default)]
pub(super) struct Shared {
    /// Requests sent and not answered yet. Emptied (so every waiting
    /// [`Pending`](super::Pending) fails at once) when the driver's stdout closes.
    pub(super) pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    /// Whether stdout closed: requests sent afterwards fail at once.
    pub(super) closed: Mutex<bool>,
    /// The tail of the JVM's stderr (Redisson's warnings, a stack trace).
    pub(super) stderr: Mutex<String>,
}

impl Shared {
    /// The kept tail of stderr, or a note that there was none, for a failure message.
    pub(super) fn stderr_tail(&self) -> String {
        let stderr = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        if stderr.is_empty() {
            "(nothing on stderr)".to_owned()
        } else {
            stderr.clone()
        }
    }
}

/// Reads the driver's stdout: the `ready` line first, then replies, each handed to the
/// request waiting for it. When stdout closes, every waiting request fails.
pub(super) async fn read_replies(
    stdout: tokio::process::ChildStdout,
    shared: Arc<Shared>,
    ready_tx: oneshot::Sender<Ready>,
) {
    let mut lines = BufReader::new(stdout).lines();
    let mut ready_tx = Some(ready_tx);
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(tx) = ready_tx.take() {
            match parse_ready(&line) {
                Some(ready) => {
                    let _ = tx.send(ready);
                }
                None => {
                    note_stray(&shared, &line);
                    ready_tx = Some(tx);
                }
            }
            continue;
        }
        match Reply::parse(&line) {
            Some(reply) => {
                let waiter = shared
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&reply.id);
                if let Some(waiter) = waiter {
                    let _ = waiter.send(reply);
                }
            }
            None => note_stray(&shared, &line),
        }
    }
    *shared.closed.lock().unwrap_or_else(|e| e.into_inner()) = true;
    shared
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
}

/// A stdout line that is not the protocol's (a library printing): kept with stderr.
fn note_stray(shared: &Shared, line: &str) {
    append(shared, &format!("[stdout] {line}\n"));
}

/// Reads the JVM's stderr, keeping its tail.
pub(super) async fn keep_stderr(stderr: tokio::process::ChildStderr, shared: Arc<Shared>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        append(&shared, &format!("{line}\n"));
    }
}

/// Appends `text` to the kept output, dropping its start beyond [`STDERR_KEPT`].
fn append(shared: &Shared, text: &str) {
    let mut kept = shared.stderr.lock().unwrap_or_else(|e| e.into_inner());
    kept.push_str(text);
    if kept.len() > STDERR_KEPT {
        let mut cut = kept.len() - STDERR_KEPT;
        while !kept.is_char_boundary(cut) {
            cut += 1;
        }
        kept.drain(..cut);
    }
}

//! The worker processes, seen from the coordinator: starting them, reading their events,
//! signalling and killing them, and making sure none outlives the coordinator.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::clock::{self, Micros};
use super::config::{WorkerCommand, WorkerSpec, WORKER_ENV};
use super::events::{self, Event, EventKind, WorkerId};

/// Lines of a worker's stderr kept for the report, should it crash.
const STDERR_LINES_KEPT: usize = 20;

/// What the coordinator knows of the workers so far, updated by one reader thread per
/// worker output.
#[derive(Debug, Default)]
pub struct Live {
    /// Every event, in the order read (each worker's in its own order).
    pub events: Vec<Event>,
    /// Lines that carried the marker but did not parse.
    pub garbled: Vec<String>,
    /// When the latest `acquired` event was reported.
    pub last_acquired_at: Option<Micros>,
    /// Workers inside a critical section, with when they reported the acquire.
    in_section: BTreeMap<WorkerId, Micros>,
    closed: BTreeSet<WorkerId>,
    stderr: BTreeMap<WorkerId, VecDeque<String>>,
}

impl Live {
    /// The workers inside a critical section, as far as their events tell, with when
    /// they reported the acquire.
    pub fn holders(&self) -> Vec<(WorkerId, Micros)> {
        self.in_section
            .iter()
            .filter(|(worker, _)| !self.closed.contains(worker))
            .map(|(worker, since)| (*worker, *since))
            .collect()
    }

    fn record(&mut self, event: Event) {
        match event.kind {
            EventKind::Acquired { .. } => {
                self.in_section.insert(event.worker, event.at);
                self.last_acquired_at = Some(event.at.max(self.last_acquired_at.unwrap_or(0)));
            }
            EventKind::Lost { .. } | EventKind::Releasing { .. } => {
                self.in_section.remove(&event.worker);
            }
            _ => {}
        }
        self.events.push(event);
    }
}

struct Shared {
    live: Mutex<Live>,
    changed: Condvar,
}

impl Shared {
    fn live(&self) -> MutexGuard<'_, Live> {
        // A reader thread that panicked leaves the data as it was: still worth reading.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How a worker process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerExit {
    /// Which worker.
    pub worker: WorkerId,
    /// Killed by a fault (its exit says nothing then).
    pub killed: bool,
    /// When it was killed, if it was.
    pub killed_at: Option<Micros>,
    /// Whether it exited by itself with success.
    pub clean: bool,
    /// Whether it exited within the bound after being asked to stop (or before).
    pub in_time: bool,
    /// Its exit status, as text.
    pub status: String,
    /// The end of its stderr.
    pub stderr_tail: Vec<String>,
}

struct WorkerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    killed_at: Option<Micros>,
    status: Option<ExitStatus>,
}

/// The running workers. Dropping it kills every worker still running.
pub struct Fleet {
    command: WorkerCommand,
    template: WorkerSpec,
    next_id: WorkerId,
    processes: BTreeMap<WorkerId, WorkerProcess>,
    shared: Arc<Shared>,
}

impl Fleet {
    /// Starts `count` workers from `template` (each with its own id).
    pub fn start(command: WorkerCommand, template: WorkerSpec, count: usize) -> Fleet {
        let mut fleet = Fleet {
            command,
            template,
            next_id: 1,
            processes: BTreeMap::new(),
            shared: Arc::new(Shared {
                live: Mutex::new(Live::default()),
                changed: Condvar::new(),
            }),
        };
        for _ in 0..count {
            fleet.spawn();
        }
        fleet
    }

    /// Starts one more worker; returns its id.
    pub fn spawn(&mut self) -> WorkerId {
        let id = self.next_id;
        self.next_id += 1;
        let spec = WorkerSpec {
            id,
            ..self.template.clone()
        };
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .env(WORKER_ENV, spec.encode())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start worker {id}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let shared = self.shared.clone();
        std::thread::spawn(move || read_events(id, stdout, &shared));
        let shared = self.shared.clone();
        std::thread::spawn(move || read_stderr(id, stderr, &shared));
        let stdin = child.stdin.take();
        self.processes.insert(
            id,
            WorkerProcess {
                child,
                stdin,
                killed_at: None,
                status: None,
            },
        );
        id
    }

    /// Runs `read` on what is known now.
    pub fn with_live<R>(&self, read: impl FnOnce(&Live) -> R) -> R {
        read(&self.shared.live())
    }

    /// Waits until `condition` holds on what is known, for at most `limit`; returns whether
    /// it held. Woken by every new event, not by polling.
    pub fn wait_until(&self, limit: Duration, condition: impl Fn(&Live) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        let mut live = self.shared.live();
        loop {
            if condition(&live) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            live = self
                .shared
                .changed
                .wait_timeout(live, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The process id of a running worker.
    pub fn pid(&self, worker: WorkerId) -> Option<u32> {
        self.processes
            .get(&worker)
            .filter(|p| p.killed_at.is_none())
            .map(|p| p.child.id())
    }

    /// Kills a worker with SIGKILL, like a crash, and waits until everything it printed
    /// has been read. Returns when it was killed.
    pub fn kill(&mut self, worker: WorkerId, flush_limit: Duration) -> Micros {
        let process = self
            .processes
            .get_mut(&worker)
            .expect("only started workers are killed");
        let _ = process.child.kill();
        let killed_at = clock::now();
        process.status = process.child.wait().ok();
        process.killed_at = Some(killed_at);
        self.wait_until(flush_limit, |live| live.closed.contains(&worker));
        killed_at
    }

    /// Asks every worker to stop (closes its stdin: it finishes its section, unlocks and
    /// exits), waits up to `limit` for all to exit, kills those that did not, and reports
    /// how each ended, killed ones included.
    pub fn stop(&mut self, limit: Duration) -> Vec<WorkerExit> {
        for process in self.processes.values_mut() {
            process.stdin = None;
        }
        let running: Vec<WorkerId> = self
            .processes
            .iter()
            .filter(|(_, p)| p.killed_at.is_none())
            .map(|(id, _)| *id)
            .collect();
        // A worker's stdout closes when it exits: the reader's end of file is the event.
        self.wait_until(limit, |live| {
            running.iter().all(|id| live.closed.contains(id))
        });
        let closed = self.with_live(|live| live.closed.clone());
        let mut exits = Vec::new();
        for (&id, process) in &mut self.processes {
            let in_time = process.killed_at.is_some() || closed.contains(&id);
            if !in_time {
                let _ = process.child.kill();
            }
            if process.status.is_none() {
                process.status = process.child.wait().ok();
            }
            let status = process.status;
            exits.push(WorkerExit {
                worker: id,
                killed: process.killed_at.is_some(),
                killed_at: process.killed_at,
                clean: in_time && status.is_some_and(|s| s.success()),
                in_time,
                status: status.map_or_else(|| "unknown".to_string(), |s| s.to_string()),
                stderr_tail: self
                    .shared
                    .live()
                    .stderr
                    .get(&id)
                    .map(|lines| lines.iter().cloned().collect())
                    .unwrap_or_default(),
            });
        }
        exits
    }

    /// Every event read, and the lines that did not parse.
    pub fn into_events(self) -> (Vec<Event>, Vec<String>) {
        let mut live = self.shared.live();
        (
            std::mem::take(&mut live.events),
            std::mem::take(&mut live.garbled),
        )
    }
}

impl Drop for Fleet {
    /// No worker outlives the run, whether it ended normally or by a panic.
    fn drop(&mut self) {
        for process in self.processes.values_mut() {
            if process.status.is_none() {
                // SIGKILL ends a stopped (SIGSTOP) process too.
                let _ = process.child.kill();
                process.status = process.child.wait().ok();
            }
        }
    }
}

fn read_events(worker: WorkerId, stdout: impl std::io::Read, shared: &Shared) {
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        match events::parse(&line) {
            Ok(Some(event)) => shared.live().record(event),
            Ok(None) => continue,
            Err(garbled) => shared.live().garbled.push(garbled),
        }
        shared.changed.notify_all();
    }
    shared.live().closed.insert(worker);
    shared.changed.notify_all();
}

fn read_stderr(worker: WorkerId, stderr: impl std::io::Read, shared: &Shared) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        let mut live = shared.live();
        let kept = live.stderr.entry(worker).or_default();
        if kept.len() == STDERR_LINES_KEPT {
            kept.pop_front();
        }
        kept.push_back(line);
    }
}

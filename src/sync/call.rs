//! Running one script call of a synchronizer: on the client's shared connection, retried
//! as far as the call allows, its refusals turned into typed errors.

use std::future::Future;

use crate::core::Core;
use crate::error::{Error, Result};
use crate::locks::attempt::error_may_have_run;
use crate::protocol::names::SyncNames;
use crate::transport::conn::Conn;
use crate::transport::explain::{explain_with, sync_checks};

/// Which failures a call may be sent again after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Any failure to reach Redis: the call is harmless to run twice (a read, setting a
    /// count that is not there, releasing a permit by its unique id).
    Always,
    /// Only a failure after which the call certainly did not run (a refused connection, a
    /// cluster's redirection): a count change (`DECR`, `INCRBY`) that ran twice would count
    /// twice, as in Redisson, which sends these once (`evalWriteNoRetryAsync`).
    IfUnsent,
}

/// What a call came to, and whether a try before the last one may have run in Redis
/// (its reply lost): the last answer may then be about the state that try left.
pub(crate) struct Outcome<T> {
    pub(crate) result: Result<T>,
    pub(crate) earlier_may_have_run: bool,
}

/// Runs `operation` (`operation` names it in errors, such as "releasing") up to the
/// client's `retry_attempts`, as `retry` allows, with its errors explained.
pub(crate) async fn run<T, F, Fut>(
    core: &Core,
    names: &SyncNames,
    operation: &'static str,
    retry: Retry,
    mut call: F,
) -> Outcome<T>
where
    F: FnMut(Conn) -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    let connections = &core.connections;
    let mut attempt = 1;
    let mut earlier_may_have_run = false;
    loop {
        let outcome = match connections.shared().await {
            Ok(shared) => {
                let outcome = call(shared.conn.clone()).await;
                match &outcome {
                    Ok(_) => connections.report_success(),
                    Err(e) => connections.report(&shared, e),
                }
                outcome.map_err(Error::from)
            }
            Err(e) => Err(e),
        };
        match outcome {
            Err(e)
                if e.is_connection_error()
                    && attempt < connections.retry_attempts()
                    && (retry == Retry::Always || !error_may_have_run(&e)) =>
            {
                tracing::debug!(attempt, error = %e, name = %names.key, "retrying");
                earlier_may_have_run |= error_may_have_run(&e);
                tokio::time::sleep(connections.backoff()).await;
                attempt += 1;
            }
            Ok(value) => {
                return Outcome {
                    result: Ok(value),
                    earlier_may_have_run,
                }
            }
            Err(e) => {
                return Outcome {
                    result: Err(explain(core, names, operation, e).await),
                    earlier_may_have_run,
                }
            }
        }
    }
}

/// [`run`], for a call whose answer alone matters.
pub(crate) async fn answer<T, F, Fut>(
    core: &Core,
    names: &SyncNames,
    operation: &'static str,
    retry: Retry,
    call: F,
) -> Result<T>
where
    F: FnMut(Conn) -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    run(core, names, operation, retry, call).await.result
}

/// `error`, from `operation` on the synchronizer `names`, as the typed error it stands
/// for: a key that holds other data ([`Error::NotALock`], saying what it holds), a
/// missing ACL permission, a count that would overflow ([`Error::Rejected`]).
pub(crate) async fn explain(
    core: &Core,
    names: &SyncNames,
    operation: &'static str,
    error: Error,
) -> Error {
    if let Error::Redis(e) = &error {
        if e.code() == Some("NOTALOCK") {
            let key = e.detail().unwrap_or(&names.key).to_string();
            return not_a_count(core, key).await;
        }
    }
    explain_with(
        &core.connections,
        operation,
        &names.key,
        || sync_checks(names),
        error,
    )
    .await
}

/// [`Error::NotALock`] for `key`, which holds something a semaphore or latch does not keep
/// there, saying what.
async fn not_a_count(core: &Core, key: String) -> Error {
    let kind: Option<String> = match core.connections.shared().await {
        Ok(shared) => {
            let mut conn = shared.conn;
            redis::cmd("TYPE")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .ok()
        }
        Err(_) => None,
    };
    let found = match kind.as_deref() {
        Some("string") => "a string that is not a count".to_string(),
        Some("hash") => "a hash (a lock, or other data)".to_string(),
        Some("zset") => "a sorted set".to_string(),
        Some("none") => "gone (it changed while the call ran)".to_string(),
        Some(other) => format!("a {other}"),
        None => "not a count".to_string(),
    };
    Error::NotALock { name: key, found }
}

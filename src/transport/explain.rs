//! Turning what Redis refused into this crate's typed errors, named after the lock and the
//! operation: a missing ACL permission ([`Error::PermissionDenied`], with the rule that
//! grants it), a key that is not a lock ([`Error::NotALock`]), any other refusal
//! ([`Error::Rejected`], without the script hash and line Redis puts in it).
//!
//! Only refusals are explained; failures to reach Redis are returned as they are. The
//! explanations cost extra round trips, on error paths only.

use crate::error::{
    channel_missing, is_auth_failure, is_permission_failure, is_transient, server_message, Error,
};
use crate::protocol::names::{LockNames, SyncNames};
use crate::protocol::scripts;
use crate::transport::connections::Connections;

/// One permission an operation needs: the command (with its key or channel) that
/// `redis.acl_check_cmd` is asked about, and how to name it to the user when it is refused.
pub(crate) struct Check {
    command: Vec<String>,
    missing: String,
}

impl Check {
    fn new(command: &[&str], missing: String) -> Self {
        Check {
            command: command.iter().map(|word| word.to_string()).collect(),
            missing,
        }
    }

    /// Write access to `key`, granted by `rule`.
    fn key(command: &[&str], key: &str, rule: &str) -> Self {
        Check::new(command, format!("access to key `{key}` ({rule})"))
    }
}

/// Every permission an operation on the lock `names` may need beyond its commands (which
/// are checked once, at connect): its keys and its channel. No unlock latch: a release
/// writes none (see `locks::release`), so a user without `~redisson_unlock_latch:*` must
/// not be told that rule is what it lacks.
pub(crate) fn lock_checks(names: &LockNames) -> Vec<Check> {
    let key = &*names.key;
    let mut checks = vec![Check::key(
        &["hincrby", key, "f", "1"],
        key,
        "a `~` pattern that matches your lock names",
    )];
    for (kept, name) in names.kind.kept.iter().zip(&*names.kept) {
        let key = (kept.checked_as)(name);
        let command: Vec<&str> = kept
            .written_by
            .iter()
            .map(|word| if *word == "$" { key.as_str() } else { word })
            .collect();
        checks.push(Check::key(&command, &key, kept.grant));
    }
    // A fair lock publishes to its waiters' own channels, `<channel>:<owner>`.
    let channel = names.wait_channel("<owner>");
    checks.push(publish_check(names.publish_command(), &channel));
    checks
}

/// Every permission an operation on the semaphore or latch `names` may need: its keys and
/// its channel.
pub(crate) fn sync_checks(names: &SyncNames) -> Vec<Check> {
    let key = &*names.key;
    let mut checks = vec![Check::key(
        &["set", key, "1"],
        key,
        "a `~` pattern that matches your semaphore and latch names",
    )];
    if let Some(timeouts) = &names.timeouts {
        checks.push(Check::key(
            &["zadd", timeouts, "1", "x"],
            timeouts,
            "a `~` pattern that matches `{<name>}:timeout`",
        ));
    }
    // A cluster or Sentinel client's count changes carry request latches (see `sync::call`).
    if let Some(latch) = names.request_latch(0) {
        checks.push(Check::key(
            &["set", &latch, "1"],
            &latch,
            "`~redisson_unlock_latch:*`",
        ));
    }
    checks.push(publish_check(names.publish_command(), &names.channel));
    checks
}

/// The permissions of a fenced write: the resource key and its fence.
pub(crate) fn fenced_write_checks(key: &str, fence: &str) -> Vec<Check> {
    vec![
        Check::key(&["set", key, "x"], key, "a `~` pattern that matches it"),
        Check::key(&["set", fence, "1"], fence, "`~redis_rlock_fence:*`"),
    ]
}

/// `publish` (`publish` or `spublish`) to `channel`.
fn publish_check(publish: &str, channel: &str) -> Check {
    Check::new(
        &[publish, channel, "0"],
        channel_missing(&publish.to_uppercase(), channel),
    )
}

/// What a call expected at its key: what an [`Error::NotALock`] says it found instead
/// depends on it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expected {
    Lock,
    /// A semaphore's or a latch's count.
    Count,
}

/// `error`, from `operation` on the lock `names`, as the typed error it stands for.
pub(crate) async fn explain(
    connections: &Connections,
    operation: &'static str,
    names: &LockNames,
    error: Error,
) -> Error {
    let checks = || lock_checks(names);
    explain_with(connections, operation, &names.key, checks, error).await
}

/// `error`, from `operation` on the semaphore or latch `names`, as the typed error it
/// stands for.
pub(crate) async fn explain_sync(
    connections: &Connections,
    operation: &'static str,
    names: &SyncNames,
    error: Error,
) -> Error {
    let checks = || sync_checks(names);
    Expected::Count
        .explain(connections, operation, &names.key, checks, error)
        .await
}

/// `outcome` of `operation` on the lock `names`, with its error explained.
pub(crate) async fn explained<T>(
    connections: &Connections,
    operation: &'static str,
    names: &LockNames,
    outcome: Result<T, Error>,
) -> Result<T, Error> {
    match outcome {
        Ok(value) => Ok(value),
        Err(e) => Err(explain(connections, operation, names, e).await),
    }
}

/// [`explain`] for an operation on `target` whose permissions `checks` lists.
pub(crate) async fn explain_with(
    connections: &Connections,
    operation: &'static str,
    target: &str,
    checks: impl FnOnce() -> Vec<Check>,
    error: Error,
) -> Error {
    Expected::Lock
        .explain(connections, operation, target, checks, error)
        .await
}

/// [`Error::NotALock`] for `key`, saying what it holds.
pub(crate) async fn not_a_lock(connections: &Connections, key: String) -> Error {
    Expected::Lock.not_found(connections, key).await
}

impl Expected {
    /// [`explain_with`], for a call that expected `self` at `target`.
    async fn explain(
        self,
        connections: &Connections,
        operation: &'static str,
        target: &str,
        checks: impl FnOnce() -> Vec<Check>,
        error: Error,
    ) -> Error {
        let Error::Redis(e) = error else {
            return error;
        };
        if is_transient(&e) || is_auth_failure(&e) || e.code().is_none() {
            return Error::Redis(e);
        }
        if e.code() == Some("NOTALOCK") {
            let key = e.detail().unwrap_or(target).to_string();
            return self.not_found(connections, key).await;
        }
        if is_permission_failure(&e) {
            let missing = match e.detail() {
                // Redis named the command itself: nothing more to find out.
                Some(detail) if detail.contains("permissions to run the") => detail.to_string(),
                _ => diagnose(connections, checks()).await,
            };
            return Error::PermissionDenied {
                operation,
                target: target.to_string(),
                missing,
            };
        }
        Error::Rejected {
            operation,
            lock: target.to_string(),
            message: server_message(&e),
            source: e,
        }
    }

    /// [`Error::NotALock`] for the key `name`, which holds something other than `self`,
    /// saying what (a hash is looked into only where a lock was expected).
    async fn not_found(self, connections: &Connections, name: String) -> Error {
        let key = name.as_str();
        let asked = connections.once(|mut conn| async move {
            let kind: String = redis::cmd("TYPE").arg(key).query_async(&mut conn).await?;
            if kind != "hash" || self == Expected::Count {
                return Ok((kind, None));
            }
            let mut ask = redis::pipe();
            ask.cmd("HEXISTS").arg(key).arg("mode");
            ask.cmd("HRANDFIELD").arg(key);
            let fields: (bool, Option<String>) = ask.query_async(&mut conn).await?;
            Ok((kind, Some(fields)))
        });
        let count = self == Expected::Count;
        let found = match asked.await {
            Err(_) if count => "not a count".to_string(),
            Err(_) => "not a lock".to_string(),
            Ok((_, Some((true, _)))) => "a read-write lock (Redisson's RReadWriteLock)".to_string(),
            Ok((_, Some((false, field)))) if field.as_deref().is_some_and(is_owner_field) => {
                "a lock of another kind (Redisson's RLock layout, no read-write `mode`)".to_string()
            }
            Ok((_, Some(_))) => "a hash that is not a lock".to_string(),
            Ok((kind, None)) => match kind.as_str() {
                "hash" => "a hash (a lock, or other data)".to_string(),
                "string" if count => "a string that is not a count".to_string(),
                "none" => "gone (it changed while the call ran)".to_string(),
                "zset" => "a sorted set".to_string(),
                other => format!("a {other}"),
            },
        };
        Error::NotALock { name, found }
    }
}

/// Whether `field` has the shape of a lock's owner field, `<client-uuid>:<decimal id>`.
fn is_owner_field(field: &str) -> bool {
    field.rsplit_once(':').is_some_and(|(client, id)| {
        !client.is_empty()
            && client.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
            && !id.is_empty()
            && id.bytes().all(|b| b.is_ascii_digit())
    })
}

/// The first of `checks` the connected user fails, in words; a pointer to the server's
/// `ACL LOG` when none fails (or the check itself cannot run).
async fn diagnose(connections: &Connections, checks: Vec<Check>) -> String {
    const UNKNOWN: &str = "a permission Redis did not name (see `ACL LOG` on the server)";
    let commands: Vec<Vec<String>> = checks.iter().map(|c| c.command.clone()).collect();
    let commands = &commands;
    let asked = |mut conn| async move { scripts::refused_checks(&mut conn, commands).await };
    match connections.once(asked).await {
        Ok(refused) => refused
            .first()
            .and_then(|&index| checks.into_iter().nth(index))
            .map_or_else(|| UNKNOWN.to_string(), |check| check.missing),
        Err(e) => {
            tracing::debug!(error = %e, "cannot check which permission is missing");
            UNKNOWN.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::channels::ChannelKind;
    use crate::protocol::kinds::ALL;
    use crate::protocol::names::SyncKind;

    const LATCH_RULE: &str = "redisson_unlock_latch";

    /// A lock user missing the latch pattern and another one must be told the other one:
    /// releases write no latch, so naming it would send them after the wrong rule.
    #[test]
    fn no_lock_check_names_the_latch_rule() {
        for kind in ALL {
            for names in [
                LockNames::new(kind, "", "app:x"),
                LockNames::new(kind, "", "app:x").on_cluster(ChannelKind::Sharded),
            ] {
                for check in lock_checks(&names) {
                    assert!(
                        !check.missing.contains(LATCH_RULE)
                            && !check.command.iter().any(|w| w.contains(LATCH_RULE)),
                        "{}: {}",
                        kind.label,
                        check.missing
                    );
                }
            }
        }
    }

    /// A cluster or Sentinel client's count changes write request latches, so their
    /// explanations keep the rule; a standalone client's write none.
    #[test]
    fn only_failover_following_clients_synchronizers_check_the_latch_rule() {
        let kinds = [
            SyncKind::Semaphore,
            SyncKind::ExpirableSemaphore,
            SyncKind::Latch,
        ];
        for kind in kinds {
            let names_latch = |names: &SyncNames| {
                sync_checks(names)
                    .iter()
                    .any(|check| check.missing.contains("`~redisson_unlock_latch:*`"))
            };
            let standalone = SyncNames::new(kind, "", "app:s");
            assert!(!names_latch(&standalone), "{kind:?}");
            let cluster = SyncNames::new(kind, "", "app:s").on_cluster(ChannelKind::Sharded);
            assert!(names_latch(&cluster), "{kind:?}");
            let sentinel = SyncNames::new(kind, "", "app:s").with_request_latches();
            assert!(names_latch(&sentinel), "{kind:?}");
        }
    }
}

//! How Redis' errors are classified: which may pass with a retry, which are refused
//! credentials or permissions, and how a server's message reads without script noise.

use super::Error;

/// True for failures of reaching Redis, after which a retry may succeed: I/O errors,
/// timeouts, dropped connections, a server that is loading or failing over, and a cluster
/// that redirects the command or is changing its topology ([`certainly_not_run`]). Not
/// refused credentials, and not an answer that is not Redis' (a protocol error at connect
/// is reported as [`Error::NotRedis`]).
pub(crate) fn is_transient(e: &redis::RedisError) -> bool {
    if is_auth_failure(e) {
        return false;
    }
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_unrecoverable_error()
        || certainly_not_run(e)
}

/// True for the refusals after which the command certainly did not run, and a retry
/// after a pause may succeed: a cluster redirection (`MOVED`, `ASK`: the slot is served
/// elsewhere; redis-rs, with its retries off, re-reads the slot map and the retry goes to
/// the new owner), a cluster changing its topology (`TRYAGAIN`, `CLUSTERDOWN`), a master
/// without its replicas (`MASTERDOWN`), a server loading its data (`LOADING`), and a node
/// that became a replica (`READONLY`, refused before any write: a demoted master).
pub(crate) fn certainly_not_run(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::BusyLoading
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::ReadOnly
        )
    )
}

/// Refused credentials: redis-rs' own kind for a failed `AUTH` at connect, and the server's
/// codes when a command is sent unauthenticated or the credentials are wrong.
pub(crate) fn is_auth_failure(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
}

/// True for a refusal for lack of an ACL permission: `NOPERM` for the command itself, and
/// the messages Redis 7 gives a script whose inner command was refused (which carry the
/// code `ERR`: see `scriptCall` in Redis' `script.c`).
pub(crate) fn is_permission_failure(e: &redis::RedisError) -> bool {
    e.code() == Some("NOPERM")
        || e.detail()
            .is_some_and(|detail| detail.starts_with("The user executing the script can't"))
}

/// How a refused PUBLISH or SUBSCRIBE (`verb`) to a lock's, semaphore's or latch's channel is
/// named in [`Error::PermissionDenied`], with the ACL rule
/// that grants it: the channel's Redisson prefix followed by `*`.
pub(crate) fn channel_missing(verb: &str, channel: &str) -> String {
    format!(
        "{verb} to channel `{channel}` (`{}`)",
        channel_rule(channel)
    )
}

/// The ACL rule that grants a lock's, semaphore's or latch's channel: its Redisson prefix
/// followed by `*`, such as `&redisson_lock__channel:*`.
pub(crate) fn channel_rule(channel: &str) -> String {
    const LATCH: &str = "redisson_countdownlatch__channel__";
    let prefix = if channel.starts_with(LATCH) {
        LATCH
    } else {
        channel
            .find(':')
            .map_or(channel, |colon| &channel[..=colon])
    };
    format!("&{prefix}*")
}

/// A server's error, without the hash and line of the script it came from: Redis 7 appends
/// ` script: <sha>, on @user_script:<line>.` to errors raised inside scripts.
pub(crate) fn server_message(e: &redis::RedisError) -> String {
    let detail = e.detail().unwrap_or_default();
    let detail = match detail.find(" script: ") {
        Some(at) => &detail[..at],
        None => detail,
    };
    match e.code() {
        Some(code) if !detail.is_empty() => format!("{code} {detail}"),
        Some(code) => code.to_string(),
        None => e.to_string(),
    }
}

/// Whether a script call that failed with `e` may still have run in Redis: anything but a
/// refused connection or an error Redis itself returned (a timed-out command is not
/// withdrawn), such as a cluster's redirection.
pub(crate) fn may_have_run(e: &redis::RedisError) -> bool {
    is_transient(e) && !e.is_connection_refusal() && !certainly_not_run(e)
}

impl Error {
    /// Whether a call that failed with this error may still have run in Redis (see
    /// [`may_have_run`]): a reply that timed out, or a connection lost after the call went
    /// out.
    pub(crate) fn may_have_run(&self) -> bool {
        match self {
            Error::Redis(e) => may_have_run(e),
            Error::Timeout { .. } => true,
            // A group's round: the last node that failed tells (a node that timed out may
            // still run its script).
            Error::QuorumUnreachable { last_error, .. } => {
                last_error.as_deref().map_or(true, Error::may_have_run)
            }
            _ => false,
        }
    }

    /// True for a refusal after which the command certainly did not run and a cluster
    /// will serve it again once its topology settles: a redirection (redis-rs, with its
    /// retries off, re-reads the slot map on `MOVED`), a slot half-way through a
    /// migration, a cluster down while it fails over, a demoted master.
    pub(crate) fn is_topology_change(&self) -> bool {
        matches!(self, Error::Redis(e) if certainly_not_run(e))
    }
}

//! Checking, once per client and lock kind, that the user may run every command that
//! kind's scripts run, before the first call of that kind sends anything.
//!
//! Redis checks the commands a script runs one at a time, as they run: a command refused
//! after a write would leave the write done (a lock without its lease, a count without its
//! latch). Checked up front with `redis.acl_check_cmd`, that cannot happen. Keys and
//! channels need no such check: Redis refuses a script whose declared keys the user may
//! not touch before it runs, and every script publishes before it frees a lock.
//!
//! The commands are asked about with the lock's own keys and with every argument they
//! take: Redis 7.0 reads a command's key arguments without checking how many were given,
//! and crashes on a short list (redis/redis#14843). A failed check is not remembered: the
//! next call checks again, so that a user's rules fixed on the server take effect at once.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};
use crate::protocol::channels::ChannelKind;
use crate::protocol::kinds::{self, Kind};
use crate::protocol::names::{LockNames, SyncNames};
use crate::protocol::scripts;
use crate::transport::connections::Connections;

/// A group's commands, with the arguments a script gives them: `$key` is the lock's hash
/// or the synchronizer's count, `$timeouts` an expirable semaphore's permits, `$channel`
/// the channel (and the words of [`Kind::word`] for a lock kind's).
type Commands = &'static [&'static [&'static str]];

/// What every lock kind runs.
const EVERY: Commands = &[
    &["exists", "$key"],
    &["type", "$key"],
    &["hexists", "$key", "f"],
    &["hget", "$key", "f"],
    &["hincrby", "$key", "f", "1"],
    &["hrandfield", "$key"],
    &["pexpire", "$key", "1"],
    &["pttl", "$key"],
    &["del", "$key"],
    &["get", "$key"],
    &["set", "$key", "1", "px", "1"],
];

/// What the semaphores and the latch run on their count.
const COUNT: Commands = &[
    &["type", "$key"],
    &["get", "$key"],
    &["set", "$key", "1"],
    &["incrby", "$key", "1"],
    &["decrby", "$key", "1"],
    &["decr", "$key"],
    &["del", "$key"],
];

/// What an expirable semaphore runs on its permits besides.
const PERMITS: Commands = &[
    &["type", "$timeouts"],
    &["zadd", "$timeouts", "1", "f"],
    &["zrem", "$timeouts", "f"],
    &["zscore", "$timeouts", "f"],
    &["zrange", "$timeouts", "0", "0", "withscores"],
    &["zrangebyscore", "$timeouts", "0", "1", "limit", "0", "1"],
    &["zcard", "$timeouts"],
    &["pttl", "$key"],
    &["pexpire", "$timeouts", "1"],
    &["del", "$timeouts"],
    &["time"],
];

/// The command groups, each checked once.
#[derive(Debug, Clone, Copy)]
enum Group {
    /// [`EVERY`].
    Every,
    /// [`COUNT`].
    Count,
    /// [`PERMITS`].
    Permits,
    /// What one lock kind runs besides every kind's commands.
    Kind(&'static Kind),
}

impl Group {
    /// Where the group's check is kept, and its commands.
    fn table(self) -> (usize, Commands) {
        match self {
            Group::Every => (0, EVERY),
            Group::Count => (1, COUNT),
            Group::Permits => (2, PERMITS),
            Group::Kind(kind) => (3 + kind.index(), kind.commands),
        }
    }
}

/// Whether each group of commands was found allowed.
#[derive(Debug, Default)]
pub(crate) struct CommandCheck {
    checked: [AtomicBool; 3 + kinds::COUNT],
    /// One check at a time: the many calls of a client's first moments wait for one
    /// check rather than each sending its own.
    checking: tokio::sync::Mutex<()>,
    /// Replica sync is on: `WAIT` and `INFO` belong to every kind's commands.
    replica_sync: bool,
    /// Sharded pub/sub: the scripts publish with `SPUBLISH` and count a fair lock's waiters
    /// with `PUBSUB SHARDNUMSUB`, and waiters subscribe with `SSUBSCRIBE`.
    channel_kind: ChannelKind,
}

impl CommandCheck {
    pub(crate) fn new(replica_sync: bool, channel_kind: ChannelKind) -> Self {
        CommandCheck {
            replica_sync,
            channel_kind,
            ..CommandCheck::default()
        }
    }

    /// Makes sure the user may run every command a lock of `names`' kind runs: at once
    /// when that was found before, otherwise with one script call.
    ///
    /// # Errors
    /// [`Error::PermissionDenied`] naming the refused commands; a connection error when the
    /// check cannot reach Redis.
    pub(crate) async fn ensure(&self, connections: &Connections, names: &LockNames) -> Result<()> {
        let groups = [Some(Group::Every), Some(Group::Kind(names.kind))];
        if self.is_checked(&groups) {
            return Ok(());
        }
        // Only keys the kind's acquire itself declares: a key pattern the user lacks then
        // fails this check exactly when it would fail the call. The latch commands are
        // asked about on the lock key; a missing latch pattern is reported by the unlock
        // it fails, which writes nothing (see `crate::transport::explain`).
        let count = self.channel_kind.count_subscribers();
        let word = |word| names.kind.word(word, names, count);
        // Boxed: it runs once per kind, and inline it would grow every lock call's future.
        Box::pin(self.check(connections, &names.key, groups, word)).await
    }

    /// [`ensure`](CommandCheck::ensure) for a semaphore, an expirable semaphore or a latch:
    /// their scripts write more than once (an expirable permit's count and its id), and a
    /// command refused between two writes would leave the first done.
    ///
    /// # Errors
    /// As [`ensure`](CommandCheck::ensure).
    pub(crate) async fn ensure_sync(
        &self,
        connections: &Connections,
        names: &SyncNames,
    ) -> Result<()> {
        let groups = [
            Some(Group::Count),
            names.timeouts.as_ref().map(|_| Group::Permits),
        ];
        if self.is_checked(&groups) {
            return Ok(());
        }
        let word = |word| match word {
            "$key" => names.key.to_string(),
            "$timeouts" => names.timeouts.as_deref().unwrap_or_default().to_string(),
            "$channel" => names.channel.to_string(),
            word => word.to_string(),
        };
        Box::pin(self.check(connections, &names.key, groups, word)).await
    }

    fn is_checked(&self, groups: &[Option<Group>; 2]) -> bool {
        groups
            .iter()
            .flatten()
            .all(|group| self.checked[group.table().0].load(Ordering::Acquire))
    }

    /// Asks Redis, one check at a time, whether the user may run the commands of `groups`
    /// (on `target`, their arguments given by `word`); on success, they count as checked.
    async fn check(
        &self,
        connections: &Connections,
        target: &str,
        groups: [Option<Group>; 2],
        word: impl Fn(&'static str) -> String,
    ) -> Result<()> {
        let _one_at_a_time = self.checking.lock().await;
        if self.is_checked(&groups) {
            return Ok(());
        }
        let commands: Vec<Vec<String>> = groups
            .iter()
            .flatten()
            .flat_map(|group| self.commands(*group))
            .map(|command| command.into_iter().map(&word).collect())
            .collect();
        let commands = &commands;
        let refused = connections
            .with_retries(
                |mut conn| async move { scripts::refused_checks(&mut conn, commands).await },
            )
            .await
            .map_err(|e| refused_probe(target, e))?;
        if refused.is_empty() {
            for group in groups.iter().flatten() {
                self.checked[group.table().0].store(true, Ordering::Release);
            }
            return Ok(());
        }
        let missing: Vec<String> = refused
            .iter()
            .map(|&index| describe(&commands[index]))
            .collect();
        Err(Error::PermissionDenied {
            operation: "using",
            target: target.to_string(),
            missing: format!("permission to run {}", missing.join(", ")),
        })
    }

    /// The commands of `group`, with the channel's commands for the groups that publish
    /// (every lock kind's, the synchronizers' count) and replica sync's for every lock
    /// kind's.
    fn commands(&self, group: Group) -> Vec<Vec<&'static str>> {
        let mut commands: Vec<Vec<&str>> = group.table().1.iter().map(|c| c.to_vec()).collect();
        // The publish command every release runs, asked about with the lock's channel
        // (Redis checks the channel's permission along with the command's): a user without
        // it would take the lock and then fail to release it. Sharded pub/sub has commands
        // of its own, which a user granted the classic ones may lack. A refused SUBSCRIBE
        // is reported by the wait it fails, naming the channel.
        if matches!(group, Group::Every | Group::Count) {
            commands.push(vec![self.channel_kind.publish(), "$channel", "0"]);
            if self.channel_kind == ChannelKind::Sharded {
                commands.push(vec!["ssubscribe", "$channel"]);
                commands.push(vec!["sunsubscribe", "$channel"]);
            }
        }
        if self.replica_sync && matches!(group, Group::Every) {
            commands.push(vec!["wait", "0", "0"]);
            commands.push(vec!["info", "replication"]);
        }
        commands
    }
}

/// The probe's own refusal, named: it runs as a script (`EVALSHA`), which every call of the
/// crate does, so a user without `+evalsha` learns it here, at its first lock call.
fn refused_probe(target: &str, error: Error) -> Error {
    match &error {
        Error::Redis(e) if crate::error::is_permission_failure(e) => {
            let message = crate::error::server_message(e);
            let missing = if message.to_lowercase().contains("evalsha") {
                "permission to run `+evalsha` (every lock call runs its script with it)".into()
            } else {
                message
            };
            Error::PermissionDenied {
                operation: "using",
                target: target.to_string(),
                missing,
            }
        }
        _ => error,
    }
}

/// A refused command, as the user would grant it: `` `+hrandfield` on key `app:1` ``.
fn describe(command: &[String]) -> String {
    let name = command[0].to_lowercase();
    let full = match command.get(1) {
        Some(sub) if name == "pubsub" => format!("{name}|{sub}"),
        _ => name,
    };
    match (full.as_str(), command.get(1)) {
        ("publish" | "spublish" | "ssubscribe" | "sunsubscribe", Some(channel)) => {
            let rule = crate::error::channel_rule(channel);
            format!("`+{full}` on channel `{channel}` (`{rule}`)")
        }
        ("time" | "pubsub|numsub" | "pubsub|shardnumsub" | "wait" | "info", _) | (_, None) => {
            format!("`+{full}`")
        }
        (_, Some(key)) => format!("`+{full}` on key `{key}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_commands_are_named_as_acl_rules() {
        let cases: [(&[&str], &str); 10] = [
            (&["hrandfield", "app:1"], "`+hrandfield` on key `app:1`"),
            (&["pubsub", "numsub", "c"], "`+pubsub|numsub`"),
            (&["pubsub", "shardnumsub", "c"], "`+pubsub|shardnumsub`"),
            (
                &["spublish", "redisson_lock__channel:{a}", "0"],
                "`+spublish` on channel `redisson_lock__channel:{a}` (`&redisson_lock__channel:*`)",
            ),
            (
                &["ssubscribe", "redisson_sc:{a}"],
                "`+ssubscribe` on channel `redisson_sc:{a}` (`&redisson_sc:*`)",
            ),
            (
                &["spublish", "redisson_countdownlatch__channel__{a}", "0"],
                "`+spublish` on channel `redisson_countdownlatch__channel__{a}` \
                 (`&redisson_countdownlatch__channel__*`)",
            ),
            (
                &["ssubscribe", "redisson_rwlock:{a}"],
                "`+ssubscribe` on channel `redisson_rwlock:{a}` (`&redisson_rwlock:*`)",
            ),
            (
                &["publish", "redisson_lock__channel:{a}", "0"],
                "`+publish` on channel `redisson_lock__channel:{a}` (`&redisson_lock__channel:*`)",
            ),
            (&["time"], "`+time`"),
            (&["wait", "0", "0"], "`+wait`"),
        ];
        for (words, named) in cases {
            let words: Vec<String> = words.iter().map(|s| s.to_string()).collect();
            assert_eq!(describe(&words), named);
        }
    }
}

//! The command line: every flag, its default and its help text (clap derive; the doc
//! comments are what `rlock --help` prints).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// The URL used when neither `--url`, `--cluster`, `--sentinel` nor `REDIS_URL` says
/// otherwise.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Inspect and repair Redisson-layout locks on Redis (redis-rlock and Redisson share them).
///
/// Lists every lock with its holders, TTL, fair queue and fencing counter; shows one lock in
/// full; force-unlocks a stuck lock through its own script so that waiters are woken; finds
/// leaks (locks without a TTL, dead fair queues, stale unlock latches) and prints the
/// command that fixes each; finds deadlocks among the waits the library's wait registry
/// records; watches locks live.
///
/// Exit codes: 0 ok; 1 problems found (leaks, deadlocks), lock not found, or nothing unlocked;
/// 2 usage error (including `unlock` without --yes when stdin is not a terminal);
/// 3 cannot connect (unreachable, refused credentials, TLS); 4 Redis answered with an
/// error (such as a missing ACL permission) or the lock kind cannot be unlocked here;
/// 5 `unlock` found the lock held by others than it showed, and left it alone.
///
/// Passwords are never printed: URLs show them as `***`. A command Redis refuses for
/// lack of an ACL permission is named with the rule to grant; the read-only rules are in
/// the README's Operations section.
#[derive(Debug, Parser)]
#[command(name = "rlock", version, max_term_width = 100)]
pub struct Cli {
    /// Where Redis is, and how the locks are named there.
    #[command(flatten)]
    pub connection: Connection,

    /// Print JSON instead of tables (one document; `watch` prints one per refresh, a line
    /// each).
    #[arg(long, global = true, help_heading = "Output")]
    pub json: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How to reach Redis: one server (`--url`), a cluster (`--cluster`) or the master that
/// Sentinel names (`--sentinel` and `--master`), as the library's `Client::connect`,
/// `connect_cluster` and `connect_sentinel` do.
#[derive(Debug, Args)]
#[command(next_help_heading = "Connection")]
pub struct Connection {
    /// URL of one Redis server: `redis://[user:password@]host:port[/db]`, or `rediss://…`
    /// for TLS. Default: $REDIS_URL, else redis://127.0.0.1:6379.
    #[arg(long, value_name = "URL", global = true, conflicts_with_all = ["cluster", "sentinel"])]
    pub url: Option<String>,

    /// Redis Cluster seed node URL(s): repeat the flag or separate with commas; one node
    /// that answers is enough, the masters are found through it and each is scanned.
    #[arg(
        long,
        value_name = "SEED",
        global = true,
        value_delimiter = ',',
        conflicts_with = "sentinel"
    )]
    pub cluster: Vec<String>,

    /// Sentinel URL(s): repeat the flag or separate with commas; needs --master. The
    /// sentinels' credentials, TLS and database serve the master too, unless
    /// --master-user/--master-password are given.
    #[arg(
        long,
        value_name = "URL",
        global = true,
        value_delimiter = ',',
        requires = "master"
    )]
    pub sentinel: Vec<String>,

    /// The name Sentinel monitors the master under (`sentinel monitor <name> ...`).
    #[arg(
        long,
        value_name = "NAME",
        global = true,
        env = "RLOCK_SENTINEL_MASTER"
    )]
    pub master: Option<String>,

    /// ACL user for the master Sentinel names (default: the sentinel URLs' user).
    #[arg(
        long,
        value_name = "USER",
        global = true,
        env = "RLOCK_MASTER_USER",
        requires = "master_password"
    )]
    pub master_user: Option<String>,

    /// Password for the master Sentinel names (default: the sentinel URLs' password).
    /// Prefer the environment variable: a command line is visible to other users.
    #[arg(
        long,
        value_name = "PASSWORD",
        global = true,
        env = "RLOCK_MASTER_PASSWORD",
        hide_env_values = true
    )]
    pub master_password: Option<String>,

    /// PEM file of the certificate authorities to trust for rediss:// URLs, instead of the
    /// system's roots.
    #[arg(long, value_name = "FILE", global = true)]
    pub tls_ca: Option<PathBuf>,

    /// PEM client certificate chain for mutual TLS; needs --tls-key.
    #[arg(long, value_name = "FILE", global = true, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", global = true, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// The key prefix the services' clients use (the library's `key_prefix`, a Redisson
    /// `NameMapper`'s prefix): only keys with it are examined, and names print without it.
    #[arg(
        long,
        value_name = "PREFIX",
        global = true,
        env = "RLOCK_KEY_PREFIX",
        default_value = ""
    )]
    pub key_prefix: String,

    /// How long connecting, and each command, may take.
    #[arg(long, value_name = "DURATION", global = true, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Every lock on the server (on every master of a cluster): name, kind, holders
    /// (client id, task id, count), remaining TTL, fair-queue length, fencing counter.
    ///
    /// Found with SCAN (never KEYS), a bounded number of keys per node; the output says
    /// when that bound stopped the scan. A fair lock with nobody queued has the layout of a
    /// reentrant lock, and is listed as one. Semaphores and latches follow: expirable
    /// semaphores, and any with waiters (a plain one nobody waits on is a bare number: see
    /// `show`). Keys are bytes: a name that is not UTF-8 shows its other bytes as \xHH;
    /// control characters in names print escaped (\n, \u{1b}); --json keeps them exact.
    ///
    /// What a walk costs, per node: one SCAN call per page (--scan-count keys walked), and
    /// for each page, read before the next is asked for: one pipeline of HSCAN (the first
    /// 256 fields of each hash of the page), one more of seven reads per lock hash found
    /// there; for the redisson_* keys, one pipeline of TYPE and one of reads. Then one
    /// SCAN … TYPE zset pass (expirable semaphores), one PUBSUB CHANNELS, and the
    /// synchronizers shown. Memory holds one page and the locks shown (--limit), whatever
    /// the keyspace.
    List(ListArgs),

    /// One lock in full: holders and counts, PTTL, the fair queue in order with each
    /// waiter's deadline against the server clock, the fencing counter, and how many
    /// clients are subscribed to its channels. A semaphore or a count-down latch: its
    /// number, an expirable semaphore's taken permits with their ids and expiries, and who
    /// waits. The waiters the library's wait registry records (clients built with
    /// `wait_registry(true)`): owner, client, how long. Exit code 1 when there is no such
    /// lock or synchronizer.
    Show(ShowArgs),

    /// Force-unlock a lock held by the holders it shows, through its kind's own script, so
    /// that a waiter is woken (a plain DEL wakes nobody). Asks for confirmation on a
    /// terminal; without one, refuses unless --yes is given (the holders read just before
    /// are then printed). The script frees the lock only if the holders shown (and, for a
    /// read-write lock, its mode) still hold it; otherwise it changes nothing, and the exit
    /// code is 5 with the holders found. --any-holder frees whoever holds it then. Exit
    /// code 1 when there is nothing to unlock (no such lock, or a key that is not a lock,
    /// which is left alone).
    Unlock(UnlockArgs),

    /// Find leaks: locks without a TTL, fair queues whose waiters are all past their
    /// deadline, stale unlock latches; for each, what is wrong and the command that fixes
    /// it. Exit code 1 when something is found.
    ///
    /// The walk is `list`'s (see `rlock list --help` for what it costs), with one PTTL per
    /// unlock latch found. Printed commands quote names for a POSIX shell ($'…' for
    /// control characters and bytes that are not UTF-8) and put `--` before them:
    /// `rlock … unlock --yes -- NAME`. A lock whose name is not UTF-8 is fixed with
    /// redis-cli (rlock and the library take names as text).
    Leaks(ScanArgs),

    /// Find deadlocks: cycles of tasks, each holding a lock the next one waits for. For
    /// each, the tasks with their clients, the lock each waits for and how long, and the
    /// command that breaks the cycle. Exit code 1 when one is found.
    ///
    /// Redis shows who holds a lock, not who waits for one: only the waits of clients
    /// built with the library's `wait_registry(true)` are seen (Redisson records none).
    /// The walk is one `SCAN … MATCH redis_rlock_waiting:* TYPE hash` pass per node, one
    /// pipelined HMGET per page, then `list`'s reads for the locks waited for. --pattern
    /// keeps the waits for locks whose name matches.
    Deadlocks(ScanArgs),

    /// A live view, refreshed every interval, of every lock or of one: holders, TTLs,
    /// queue. Until Ctrl-C.
    Watch(WatchArgs),
}

/// How much of the keyspace a scan may walk.
#[derive(Debug, Args, Clone)]
pub struct ScanArgs {
    /// Only locks whose name (without the key prefix) matches this Redis glob pattern.
    #[arg(long, value_name = "GLOB", default_value = "*")]
    pub pattern: String,

    /// Print at most this many locks (the first by name).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub limit: usize,

    /// The COUNT hint of each SCAN call: keys Redis walks per call, and so the size of
    /// the page read before the next is asked for.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub scan_count: u64,

    /// Stop each scan pass of a node after about this many keys walked; the output says
    /// that the scan is incomplete.
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub scan_limit: u64,
}

/// `rlock list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// What to scan.
    #[command(flatten)]
    pub scan: ScanArgs,
}

/// `rlock show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The lock's name, without the key prefix.
    pub name: String,
}

/// `rlock unlock`.
#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// The lock's name, without the key prefix.
    pub name: String,

    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Free the lock whoever holds it when the script runs, even a holder that took it
    /// after the confirmation showed another (without it, a lock whose holders changed is
    /// left alone: exit code 5).
    #[arg(long)]
    pub any_holder: bool,
}

/// `rlock watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Watch this lock only (as `show`); without it, every lock (as `list`).
    pub name: Option<String>,

    /// Time between refreshes: 500ms, 1s, 2m.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,

    /// Stop after this many refreshes (for scripts and tests); default: until Ctrl-C.
    #[arg(long, value_name = "N")]
    pub iterations: Option<u64>,

    /// What to scan when watching every lock.
    #[command(flatten)]
    pub scan: ScanArgs,
}

/// `500ms`, `1s`, `1.5s`, `2m`, `1h`, or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (try 500ms, 1s, 2m)"))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown unit `{other}` (use ms, s, m or h)")),
    };
    if !(seconds > 0.0 && seconds <= 86_400.0) {
        return Err(format!(
            "`{text}` is out of range (more than 0, at most 24h)"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3d").is_err());
    }

    #[test]
    fn seeds_split_on_commas_and_repeat() {
        let cli = Cli::try_parse_from([
            "rlock",
            "--cluster",
            "redis://a:1,redis://b:2",
            "--cluster",
            "redis://c:3",
            "list",
        ])
        .unwrap();
        assert_eq!(cli.connection.cluster.len(), 3);
        assert!(Cli::try_parse_from(["rlock", "--sentinel", "redis://s:1", "list"]).is_err());
    }
}

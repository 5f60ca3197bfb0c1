//! The shared resource the workers write to in their critical sections: one key on a Redis
//! server of its own, which no fault touches, guarded by a fence (the highest token it
//! accepted).
//!
//! Writes take two paths that share one fence: the library's `Client::fenced_set`, and the
//! engine's own fenced write, which does the same check and, when it accepts, appends the
//! write to a log list in the same script. The log is the resource's account, in the order
//! it accepted them, of who wrote: the checker compares it with the tokens handed out.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Script};
use redis_rlock::Client;

use super::events::WorkerId;

/// The resource's key.
pub const RESOURCE_KEY: &str = "torture:resource";
/// The list of accepted logged writes, oldest first.
pub const LOG_KEY: &str = "torture:resource:log";

/// The fence the library's `fenced_set` keeps for [`RESOURCE_KEY`]
/// (`redis_rlock_fence:{<key>}`); the logged write checks and raises the same one.
fn fence_key() -> String {
    format!("redis_rlock_fence:{{{RESOURCE_KEY}}}")
}

/// `lua/fenced_set.lua`, plus an RPUSH of the accepted write to the log, atomically.
const LOGGED_FENCED_SET: &str = r"
-- KEYS[1] resource, KEYS[2] fence, KEYS[3] log; ARGV[1] token, ARGV[2] log entry
local highest = tonumber(redis.call('get', KEYS[2]) or '0')
if tonumber(ARGV[1]) < highest then
    return 0
end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
redis.call('rpush', KEYS[3], ARGV[2])
return 1
";

/// One accepted logged write, as the log holds it: `<token>:<worker>:<acq>:<seq>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEntry {
    /// The token the write carried.
    pub token: u64,
    /// Who wrote.
    pub worker: WorkerId,
    /// Under which of the worker's acquisitions.
    pub acq: u64,
    /// Which write of the section.
    pub seq: u32,
}

impl LogEntry {
    /// The text stored in the log.
    pub fn encode(&self) -> String {
        format!("{}:{}:{}:{}", self.token, self.worker, self.acq, self.seq)
    }

    /// Reads an entry written by [`encode`](LogEntry::encode).
    pub fn decode(text: &str) -> Option<LogEntry> {
        let mut parts = text.split(':');
        let entry = LogEntry {
            token: parts.next()?.parse().ok()?,
            worker: parts.next()?.parse().ok()?,
            acq: parts.next()?.parse().ok()?,
            seq: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(entry)
    }
}

/// A writer's connections to the resource server.
#[derive(Clone)]
pub struct Resource {
    /// For the library's `fenced_set`.
    client: Client,
    /// For the logged write: no retries, so that a write is logged at most once per call.
    conn: MultiplexedConnection,
    script: Script,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource").finish_non_exhaustive()
    }
}

/// The resource server is not faulted: its timeouts only have to outlast a busy machine.
const RESOURCE_RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

impl Resource {
    /// Connects to the resource server at `url`.
    ///
    /// # Errors
    /// When it cannot be reached.
    pub async fn connect(url: &str) -> Result<Resource, String> {
        let client = Client::builder(url)
            .response_timeout(RESOURCE_RESPONSE_TIMEOUT)
            .build()
            .await
            .map_err(|e| format!("resource client: {e}"))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(RESOURCE_RESPONSE_TIMEOUT));
        let conn = redis::Client::open(url)
            .map_err(|e| format!("resource url: {e}"))?
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| format!("resource connection: {e}"))?;
        Ok(Resource {
            client,
            conn,
            script: Script::new(LOGGED_FENCED_SET),
        })
    }

    /// The engine's fenced write: sets the resource to `entry` and logs it, unless a write
    /// with a higher token was accepted before. Returns whether it was accepted.
    ///
    /// # Errors
    /// When the resource server does not answer.
    pub async fn write_logged(&self, entry: LogEntry) -> redis::RedisResult<bool> {
        let mut conn = self.conn.clone();
        self.script
            .key(RESOURCE_KEY)
            .key(fence_key())
            .key(LOG_KEY)
            .arg(entry.token)
            .arg(entry.encode())
            .invoke_async(&mut conn)
            .await
    }

    /// The library's fenced write, with the same fence. Returns whether it was accepted.
    ///
    /// # Errors
    /// When the resource server does not answer.
    pub async fn write_with_library(&self, entry: LogEntry) -> redis_rlock::Result<bool> {
        self.client
            .fenced_set(RESOURCE_KEY, entry.token, entry.encode().as_bytes())
            .await
    }
}

/// Reads the whole log, oldest first. Entries that do not parse are returned as errors
/// for the checker to report.
///
/// # Errors
/// When the resource server cannot be read.
pub async fn read_log(url: &str) -> Result<Vec<Result<LogEntry, String>>, String> {
    let mut conn = redis::Client::open(url)
        .map_err(|e| format!("resource url: {e}"))?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("resource connection: {e}"))?;
    let raw: Vec<String> = redis::cmd("LRANGE")
        .arg(LOG_KEY)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .map_err(|e| format!("reading the resource log: {e}"))?;
    Ok(raw
        .into_iter()
        .map(|text| LogEntry::decode(&text).ok_or(text))
        .collect())
}

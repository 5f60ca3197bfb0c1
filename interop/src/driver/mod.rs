//! The Java side: a handle on one Redisson client running in a child JVM (the driver in
//! `interop/redisson/`), scripted one request at a time over its stdin and stdout.
//!
//! Requests go out as `<id> <thread> <words…>` lines; replies come back as JSON lines
//! carrying the same id, in the order they complete, so a test can start a Java `lock()`
//! that blocks, act on the Rust side, and await the Java reply later. The protocol is
//! documented in `Driver.java`.
//!
//! Everything is bounded: the JVM's start ([`START_LIMIT`]) and every reply
//! ([`REPLY_LIMIT`], or the limit a test gives). The JVM is killed when its handle drops,
//! and it exits by itself when its stdin closes, so a test that panics leaves no JVM behind.
//!
//! By job: `options.rs` says what to start (the lock kinds and a client's settings),
//! `redisson.rs` starts the JVM and sends requests, `requests.rs` awaits a request's reply
//! and names the logical Java threads requests run on, `reply.rs` reads the driver's JSON
//! lines, and `output.rs` reads the JVM's stdout and stderr.

mod options;
mod output;
mod redisson;
mod reply;
mod requests;

pub use options::{Kind, RedissonOptions};
pub use redisson::Redisson;
pub use reply::{Ready, Reply};
pub use requests::{JavaThread, Pending};

use std::path::PathBuf;
use std::time::Duration;

/// How long a JVM may take to start and connect its Redisson client: a few seconds
/// usually, far more on a loaded 2-core machine building something else.
pub const START_LIMIT: Duration = Duration::from_secs(90);

/// How long a reply to a request that should not block may take.
pub const REPLY_LIMIT: Duration = Duration::from_secs(15);

/// The environment variable naming the driver jar; by default
/// `interop/redisson/target/redisson-driver.jar`, which `interop/redisson/run` builds.
pub const JAR_ENV: &str = "REDISSON_DRIVER_JAR";

/// The environment variable naming the Redisson version the driver must report (set by
/// `interop/redisson/run`, so that the version its summary line names is the one tested).
pub const VERSION_ENV: &str = "REDISSON_EXPECTED_VERSION";

/// The driver jar, which must exist: the suite fails, it never skips, when Java's side is
/// missing.
///
/// # Panics
///
/// When the jar is not there, with the command that builds it.
pub fn driver_jar() -> PathBuf {
    let jar = std::env::var_os(JAR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("redisson/target/redisson-driver.jar")
        });
    assert!(
        jar.is_file(),
        "the Redisson driver {} is missing: build it and run the suite with \
         `interop/redisson/run` (needs Java 17 and Maven)",
        jar.display()
    );
    jar
}

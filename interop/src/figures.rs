//! Measured figures: each scenario reports what it timed as `name value` lines, on stderr
//! and, when `INTEROP_FIGURES` names a file, appended to it, so `interop/redisson/run` can
//! print them after the run.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable naming the file figures are appended to.
pub const FIGURES_ENV: &str = "INTEROP_FIGURES";

/// Wall-clock microseconds since the epoch: the clock the Java driver stamps its replies
/// with, so one hand-over between the two processes on one machine can be timed.
pub fn now_us() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970");
    i64::try_from(since.as_micros()).expect("microseconds fit in i64")
}

/// Reports one measured figure, such as `figure("wake_up_ms java->rust", 3.2)`.
///
/// # Panics
///
/// When the figures file cannot be written.
pub fn figure(name: &str, value: f64) {
    let line = format!("{name} {value:.1}");
    eprintln!("FIGURE {line}");
    if let Some(path) = std::env::var_os(FIGURES_ENV) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("open {}: {e}", path.to_string_lossy()));
        writeln!(file, "{line}").expect("write a figure");
    }
}

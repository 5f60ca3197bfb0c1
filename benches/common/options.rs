//! What a run measures, from the environment:
//!
//! - `QUICK=1`: shorter runs (fewer pairs, shorter contention), for a first look;
//! - `PAIRS`, `WARMUP`: W1's timed and warm-up pairs per contender (10,000 and 500; with
//!   `QUICK`, 2,000 and 200);
//! - `CONTENDERS`, `FLAVOURS`, `PLACEMENTS`: comma-separated ids to run, the others left
//!   out (all when unset); ids are printed in every JSON line (`contender_id`, `flavour`,
//!   `placement`).

use std::time::Duration;

/// Whether `QUICK` is set.
pub fn quick() -> bool {
    std::env::var_os("QUICK").is_some()
}

/// A count from the environment, or `default`.
pub fn count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Whether the comma-separated list in `name` has `id`; true when `name` is unset.
pub fn wanted(name: &str, id: &str) -> bool {
    std::env::var(name).map_or(true, |list| list.split(',').any(|w| w.trim() == id))
}

/// W1's warm-up and timed pairs per contender.
pub fn pairs() -> (usize, usize) {
    let (warmup, pairs) = if quick() { (200, 2_000) } else { (500, 10_000) };
    (count("WARMUP", warmup), count("PAIRS", pairs))
}

/// How long W2 and W3 run each contender.
pub fn contention() -> Duration {
    if quick() {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(5)
    }
}

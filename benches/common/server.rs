//! What redis-server reports about itself.

use crate::support::RedisServer;

/// CPU seconds (system + user) redis-server has used so far, from `INFO cpu`, whose
/// figures have a fractional part (`support::info_field` reads whole numbers).
pub fn cpu_seconds(server: &RedisServer) -> f64 {
    let info = server.cli(&["INFO", "cpu"]);
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} in INFO cpu: {info}"))
    };
    field("used_cpu_sys") + field("used_cpu_user")
}

/// Commands Redis has run, those that scripts ran included (`INFO commandstats`), leaving
/// out the benchmark's own INFO and FLUSHALL calls.
pub fn commands(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter(|line| !line.starts_with("cmdstat_info") && !line.starts_with("cmdstat_flushall"))
        .filter_map(|line| {
            line.split_once("calls=")?
                .1
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// `INFO commandstats` for EVALSHA: calls and µs so far.
pub fn evalsha_calls_and_usec(server: &RedisServer) -> (i64, i64) {
    let field = |sub| crate::support::info_field(server, "commandstats", "cmdstat_evalsha", sub);
    (field("calls"), field("usec"))
}

/// Redis's `used_memory`, in bytes.
pub fn used_memory(server: &RedisServer) -> i64 {
    crate::support::info_field(server, "memory", "used_memory", "")
}

//! What Redis spends on one contender's turns when contenders take turns on one server:
//! its CPU (`INFO cpu`, `used_cpu_sys` + `used_cpu_user`) and the commands it ran, by name
//! (`INFO commandstats`, those scripts run included), read before and after each turn.
//!
//! The readings go over one connection kept open, not through `redis-cli`: a turn of W1 is
//! 100 pairs, a few milliseconds of Redis CPU, and a new connection per reading would cost
//! Redis a noticeable part of that. What one reading costs Redis is measured once and taken
//! off each turn; the benchmark's own `INFO` and `FLUSHALL` calls are not counted.

use std::collections::BTreeMap;

/// The connection the readings go over.
pub struct Meter {
    conn: redis::Connection,
    /// Redis CPU one reading costs, in seconds.
    reading_cost: f64,
}

/// Redis' counters at one moment.
pub struct Reading {
    cpu_s: f64,
    calls: BTreeMap<String, u64>,
}

/// What Redis spent over some turns.
#[derive(Default, Clone)]
pub struct Spent {
    cpu_s: f64,
    calls: BTreeMap<String, u64>,
}

/// The benchmark's own commands, left out.
const OWN: [&str; 2] = ["info", "flushall"];

impl Meter {
    /// Connects to the Redis at `url` and measures what one reading costs it.
    pub fn connect(url: &str) -> Meter {
        let conn = redis::Client::open(url)
            .and_then(|client| client.get_connection())
            .expect("connect to the benchmark's redis-server");
        let mut meter = Meter {
            conn,
            reading_cost: 0.0,
        };
        const READINGS: u32 = 50;
        let first = meter.read();
        for _ in 1..READINGS {
            meter.read();
        }
        meter.reading_cost = (meter.read().cpu_s - first.cpu_s) / f64::from(READINGS);
        meter
    }

    /// Redis CPU one reading costs, in µs (taken off every turn).
    pub fn reading_cost_us(&self) -> f64 {
        self.reading_cost * 1e6
    }

    /// Redis' counters now.
    pub fn read(&mut self) -> Reading {
        let info: String = redis::cmd("INFO")
            .arg("cpu")
            .arg("commandstats")
            .query(&mut self.conn)
            .expect("INFO cpu commandstats");
        let mut cpu_s = 0.0;
        let mut calls = BTreeMap::new();
        for line in info.lines() {
            let Some((name, value)) = line.trim().split_once(':') else {
                continue;
            };
            if name == "used_cpu_sys" || name == "used_cpu_user" {
                cpu_s += value.parse::<f64>().expect("a CPU time in INFO cpu");
            } else if let Some(command) = name.strip_prefix("cmdstat_") {
                let count = value
                    .strip_prefix("calls=")
                    .and_then(|rest| rest.split(',').next())
                    .and_then(|n| n.parse().ok())
                    .expect("calls= in INFO commandstats");
                if !OWN.contains(&command) {
                    calls.insert(command.to_string(), count);
                }
            }
        }
        Reading { cpu_s, calls }
    }

    /// Empties the keyspace between turns: keys one contender leaves to expire (Redisson's
    /// unlock latches) must not expire on the next one's turn.
    pub fn flush(&mut self) {
        redis::cmd("FLUSHALL")
            .query::<()>(&mut self.conn)
            .expect("FLUSHALL");
    }

    /// What Redis spent since `before`, less the cost of a reading.
    pub fn since(&mut self, before: &Reading) -> Spent {
        let now = self.read();
        let calls = now
            .calls
            .iter()
            .map(|(command, n)| {
                let earlier = before.calls.get(command).copied().unwrap_or(0);
                (command.clone(), n.saturating_sub(earlier))
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        Spent {
            cpu_s: (now.cpu_s - before.cpu_s - self.reading_cost).max(0.0),
            calls,
        }
    }
}

impl Spent {
    pub fn add(&mut self, other: Spent) {
        self.cpu_s += other.cpu_s;
        for (command, n) in other.calls {
            *self.calls.entry(command).or_default() += n;
        }
    }

    /// Redis CPU per pair over `pairs` pairs, in µs.
    pub fn cpu_us_per(&self, pairs: f64) -> f64 {
        self.cpu_s * 1e6 / pairs
    }

    /// Commands per pair over `pairs` pairs.
    pub fn commands_per(&self, pairs: f64) -> f64 {
        self.calls.values().sum::<u64>() as f64 / pairs
    }

    /// The commands per pair by name, most first, those under 0.01 per pair left out:
    /// `evalsha 2.00, hincrby 1.00, …`.
    pub fn by_command(&self, pairs: f64) -> String {
        let mut commands: Vec<(&String, f64)> = self
            .calls
            .iter()
            .map(|(command, n)| (command, *n as f64 / pairs))
            .filter(|(_, per_pair)| *per_pair >= 0.005)
            .collect();
        commands.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        commands
            .iter()
            .map(|(command, per_pair)| format!("{command} {per_pair:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

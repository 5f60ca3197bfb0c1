//! Printing the model: aligned tables for people, JSON (the model serialized) for scripts.

use std::fmt::Write as _;

use serde::Serialize;

use crate::model::{DeadlockReport, Holder, LeakReport, Listing, LockDetail, LockView, SyncDetail};
use crate::scan::ScanReport;

/// `value` as pretty JSON, one document.
pub fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).expect("the model serializes")
}

/// `value` as JSON on one line (`watch --json` prints one per refresh).
pub fn json_line<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("the model serializes")
}

/// Whether a terminal acts on `c` rather than print it: control characters (escape
/// sequences, newlines that would draw a fake row) and the bidirectional overrides that
/// reorder what follows them.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` safe to print on a terminal: every [unsafe](is_unsafe) character escaped as Rust
/// writes it (`\n`, `\u{1b}`). Names, keys and waiters are data anyone with write access
/// to Redis chose; JSON output carries them exact, as JSON escapes them itself.
pub fn printable(text: &str) -> String {
    if !text.chars().any(is_unsafe) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if is_unsafe(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A table with aligned columns; the last column is not padded.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers (made [printable]).
    pub fn new(headers: &[&str]) -> Self {
        Table {
            rows: vec![headers.iter().map(|h| printable(h)).collect()],
        }
    }

    /// Adds a row. Every cell is made [printable]: one cell is one line of one
    /// column, whatever the data it shows.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows
            .push(cells.iter().map(|cell| printable(cell)).collect());
    }

    /// The table, each line prefixed with `indent`.
    pub fn render(&self, indent: &str) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::from(indent);
            for (c, cell) in row.iter().enumerate() {
                if c + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A duration in ms, short: `850ms`, `29.8s`, `4m10s`, `2h5m`; negative ones as `-…`.
pub fn millis(ms: i64) -> String {
    if ms < 0 {
        return format!("-{}", millis(-ms));
    }
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{}s", ms / 60_000, ms % 60_000 / 1000),
        _ => format!("{}h{}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

/// A lock's TTL cell: `29.8s`, `no TTL`, or `-` when not held.
pub fn ttl(pttl: Option<i64>) -> String {
    match pttl {
        Some(-1) => "no TTL".to_string(),
        Some(ms) if ms >= 0 => millis(ms),
        _ => "-".to_string(),
    }
}

/// `client:task ×count`, with the mode of a read-write hold.
fn holder(h: &Holder) -> String {
    let mode = h.mode.map(|m| format!(" ({m})")).unwrap_or_default();
    format!("{}:{} ×{}{mode}", h.client_id, h.task_id, h.count)
}

/// The holders cell: every holder, or `-`.
fn holders(lock: &LockView) -> String {
    if lock.holders.is_empty() {
        return "-".to_string();
    }
    let mut text = lock
        .holders
        .iter()
        .map(holder)
        .collect::<Vec<_>>()
        .join(", ");
    if lock.holders_truncated {
        text.push_str(", …");
    }
    text
}

/// An optional number, or `-`.
fn number<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// `list`'s table.
pub fn listing(listing: &Listing) -> String {
    let mut out = String::new();
    if listing.locks.is_empty() {
        out.push_str("no locks found\n");
    } else {
        let mut table = Table::new(&["NAME", "KIND", "TTL", "QUEUE", "TOKEN", "NODE", "HOLDERS"]);
        for lock in &listing.locks {
            let queue = match (lock.queue_length, lock.stale_waiters) {
                (Some(n), Some(stale)) if stale > 0 => format!("{n} ({stale} stale)"),
                (n, _) => number(n),
            };
            table.row(vec![
                lock.name.clone(),
                lock.kind.label().to_string(),
                ttl(lock.pttl_ms),
                queue,
                number(lock.fencing_token),
                lock.node.clone(),
                holders(lock),
            ]);
        }
        out.push_str(&table.render(""));
    }
    if listing.truncated {
        let _ = writeln!(
            out,
            "{} of {} locks shown (--limit)",
            listing.locks.len(),
            listing.total
        );
    }
    if !listing.synchronizers.is_empty() {
        out.push_str("\nsemaphores and latches (expirable ones, and any with waiters)\n");
        let mut table = Table::new(&["NAME", "KIND", "VALUE", "PERMITS TAKEN", "WAITING ON"]);
        for sync in &listing.synchronizers {
            let waiting = sync
                .subscribers
                .iter()
                .filter(|c| c.total > 0)
                .map(|c| format!("{} ({})", c.channel, c.total))
                .collect::<Vec<_>>()
                .join(", ");
            table.row(vec![
                sync.name.clone(),
                if sync.permits.is_empty() {
                    "semaphore or latch".to_string()
                } else {
                    "expirable semaphore".to_string()
                },
                number(sync.value),
                sync.permits.len().to_string(),
                if waiting.is_empty() {
                    "-".to_string()
                } else {
                    waiting
                },
            ]);
        }
        out.push_str(&table.render(""));
    }
    out.push_str(&scan_note(&listing.scan));
    out
}

/// A line saying where the scan stopped short, or nothing.
pub fn scan_note(scan: &ScanReport) -> String {
    let mut out = String::new();
    for pass in scan.passes.iter().filter(|p| !p.complete) {
        let _ = writeln!(
            out,
            "note: the scan of {} ({}) stopped after about {} keys (--scan-limit): the \
             results may be incomplete",
            pass.node, pass.filter, pass.walked
        );
    }
    out
}

/// `show`'s text.
pub fn detail(detail: &LockDetail) -> String {
    let lock = &detail.lock;
    let mut out = String::new();
    let mut facts = Table::new(&["lock", &lock.name]);
    facts.row(vec!["key".into(), lock.key.clone()]);
    let kind = match &lock.mode {
        Some(mode) => format!("{} (mode {mode})", lock.kind.label()),
        None => lock.kind.label().to_string(),
    };
    facts.row(vec!["kind".into(), kind]);
    facts.row(vec!["node".into(), lock.node.clone()]);
    facts.row(vec![
        "state".into(),
        if lock.held { "held" } else { "free" }.to_string(),
    ]);
    let ttl_text = match lock.pttl_ms {
        Some(-1) => "no TTL: it never expires (see `rlock leaks`)".to_string(),
        Some(ms) if ms >= 0 => format!("{} ({ms} ms)", millis(ms)),
        _ => "-".to_string(),
    };
    facts.row(vec!["ttl".into(), ttl_text]);
    facts.row(vec!["fencing token".into(), number(lock.fencing_token)]);
    facts.row(vec![
        "server time".into(),
        format!("{} ms", detail.server_time_ms),
    ]);
    out.push_str(&facts.render(""));

    out.push_str("\nholders\n");
    if lock.holders.is_empty() {
        out.push_str("  none\n");
    } else {
        let mut table = Table::new(&["CLIENT ID", "TASK ID", "COUNT", "MODE"]);
        for h in &lock.holders {
            table.row(vec![
                h.client_id.clone(),
                h.task_id.clone(),
                h.count.to_string(),
                h.mode.unwrap_or("").to_string(),
            ]);
        }
        out.push_str(&table.render("  "));
        if lock.holders_truncated {
            out.push_str("  … more fields than one read returns\n");
        }
    }

    if let Some(length) = lock.queue_length {
        let _ = writeln!(out, "\nqueue ({length} waiting, head first)");
        let mut table = Table::new(&["#", "WAITER", "DEADLINE (ms)", "IN", "SUBSCRIBED"]);
        for waiter in &detail.queue {
            let remaining = match waiter.remaining_ms {
                Some(ms) if ms < 0 => format!("past by {}", millis(-ms)),
                Some(ms) => millis(ms),
                None => "no deadline".to_string(),
            };
            table.row(vec![
                waiter.position.to_string(),
                waiter.owner.clone(),
                number(waiter.deadline_ms),
                remaining,
                waiter.subscribers.to_string(),
            ]);
        }
        out.push_str(&table.render("  "));
        if detail.queue_truncated {
            let _ = writeln!(out, "  … {} shown", detail.queue.len());
        }
    }

    if !detail.registered_waiters.is_empty() {
        let _ = writeln!(
            out,
            "\nwaiters ({} in the wait registry, longest waiting first)",
            detail.registered_waiters.len()
        );
        let mut table = Table::new(&["WAITER", "CLIENT", "WAITING FOR", "SINCE (ms)"]);
        for waiter in &detail.registered_waiters {
            table.row(vec![
                waiter.owner.clone(),
                waiter.client.clone().unwrap_or_else(|| "-".to_string()),
                waiter.waited_ms.map_or_else(|| "-".to_string(), millis),
                number(waiter.since_ms),
            ]);
        }
        out.push_str(&table.render("  "));
    }

    out.push_str("\nsubscribers\n");
    let mut table = Table::new(&["CHANNEL", "CLIENTS", "PER NODE"]);
    for channel in &detail.subscribers {
        let per_node = channel
            .per_node
            .iter()
            .map(|n| format!("{} {}", n.node, n.count))
            .collect::<Vec<_>>()
            .join(", ");
        table.row(vec![
            channel.channel.clone(),
            channel.total.to_string(),
            per_node,
        ]);
    }
    out.push_str(&table.render("  "));
    let _ = writeln!(out, "  ({})", detail.subscribers_note);
    out
}

/// `show`'s text for a semaphore or a latch.
pub fn sync_detail(detail: &SyncDetail) -> String {
    let mut out = String::new();
    let mut facts = Table::new(&["synchronizer", &detail.name]);
    facts.row(vec!["key".into(), detail.key.clone()]);
    let kind = if detail.permits.is_empty() {
        "semaphore or count-down latch (one layout: a number)"
    } else {
        "permit-expirable semaphore"
    };
    facts.row(vec!["kind".into(), kind.to_string()]);
    facts.row(vec!["node".into(), detail.node.clone()]);
    facts.row(vec![
        "value".into(),
        match detail.value {
            Some(value) => format!("{value} (free permits, or the latch's count)"),
            None => "- (no key)".to_string(),
        },
    ]);
    let ttl = match detail.pttl_ms {
        Some(-1) => "none (as Redisson sets it)".to_string(),
        Some(ms) => format!("{} ({ms} ms)", millis(ms)),
        None => "-".to_string(),
    };
    facts.row(vec!["ttl".into(), ttl]);
    facts.row(vec![
        "server time".into(),
        format!("{} ms", detail.server_time_ms),
    ]);
    out.push_str(&facts.render(""));
    if !detail.permits.is_empty() {
        let _ = writeln!(
            out,
            "\npermits taken ({}{}, soonest to expire first)",
            detail.permits.len(),
            if detail.permits.len() == 100 {
                " or more"
            } else {
                ""
            }
        );
        let mut table = Table::new(&["ID", "EXPIRES (ms)", "IN"]);
        for permit in &detail.permits {
            let remaining = if permit.remaining_ms < 0 {
                format!("past by {}", millis(-permit.remaining_ms))
            } else {
                millis(permit.remaining_ms)
            };
            table.row(vec![
                permit.id.clone(),
                permit.expires_ms.to_string(),
                remaining,
            ]);
        }
        out.push_str(&table.render("  "));
    }
    out.push_str("\nsubscribers (waiters)\n");
    let mut table = Table::new(&["CHANNEL", "CLIENTS"]);
    for channel in &detail.subscribers {
        table.row(vec![channel.channel.clone(), channel.total.to_string()]);
    }
    out.push_str(&table.render("  "));
    out
}

/// `leaks`' text.
pub fn leaks(report: &LeakReport) -> String {
    let mut out = String::new();
    if report.leaks.is_empty() {
        let _ = writeln!(
            out,
            "no leaks found ({} locks, {} unlock latches examined)",
            report.locks_examined, report.latches_examined
        );
    } else {
        let _ = writeln!(
            out,
            "{} problem(s) found ({} locks, {} unlock latches examined):",
            report.leaks.len(),
            report.locks_examined,
            report.latches_examined
        );
        for leak in &report.leaks {
            let _ = writeln!(
                out,
                "\n{} [{}] on {}",
                printable(&leak.name),
                leak.problem,
                leak.node
            );
            let _ = writeln!(out, "  key:  {}", printable(&leak.key));
            let _ = writeln!(out, "  what: {}", printable(&leak.detail));
            let _ = writeln!(out, "  fix:  {}", printable(&leak.fix));
            if let Some(alternative) = &leak.alternative {
                let _ = writeln!(out, "  or:   {}", printable(alternative));
            }
        }
        if report.leaks.iter().any(|l| l.fix.contains("***")) {
            out.push_str("\n(*** stands for the password you gave: the commands need it back)\n");
        }
    }
    out.push_str(&scan_note(&report.scan));
    out
}

/// `deadlocks`' text: each cycle with its tasks, their clients and waits, and the fix.
pub fn deadlocks(report: &DeadlockReport) -> String {
    let mut out = String::new();
    if report.deadlocks.is_empty() {
        let _ = writeln!(
            out,
            "no deadlock among {} registered waits on {} locks",
            report.waits_examined, report.locks_examined
        );
    }
    for (i, deadlock) in report.deadlocks.iter().enumerate() {
        let _ = writeln!(
            out,
            "deadlock {}: {} tasks, each waiting for a lock the next one holds",
            i + 1,
            deadlock.steps.len()
        );
        let mut table = Table::new(&["TASK", "CLIENT", "WAITS FOR", "HELD BY", "WAITING", "NODE"]);
        for step in &deadlock.steps {
            table.row(vec![
                step.owner.clone(),
                step.client.clone().unwrap_or_else(|| "-".to_string()),
                step.waits_for.clone(),
                step.held_by.clone(),
                step.waited_ms.map_or_else(|| "-".to_string(), millis),
                step.node.clone(),
            ]);
        }
        out.push_str(&table.render("  "));
        let _ = writeln!(
            out,
            "  fix: free `{}`, held by the task whose wait began last (its client reports \
             the lock lost), or stop one of these tasks:\n    {}",
            printable(&deadlock.break_lock),
            printable(&deadlock.fix)
        );
    }
    out.push_str(&scan_note(&report.scan));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_short() {
        assert_eq!(millis(850), "850ms");
        assert_eq!(millis(29_812), "29.8s");
        assert_eq!(millis(250_000), "4m10s");
        assert_eq!(millis(7_500_000), "2h5m");
        assert_eq!(millis(-1_500), "-1.5s");
        assert_eq!(ttl(Some(-1)), "no TTL");
        assert_eq!(ttl(None), "-");
    }

    #[test]
    fn tables_align() {
        let mut table = Table::new(&["A", "LONGER"]);
        table.row(vec!["wide cell".into(), "x".into()]);
        assert_eq!(table.render(""), "A          LONGER\nwide cell  x\n");
    }
}

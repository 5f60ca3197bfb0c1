//! `rlock deadlocks`: cycles of tasks, each holding a lock the next one waits for, found in
//! the graph of holds (the lock hashes) and waits (the library's opt-in wait registry).
//! Redis shows who holds a lock but not who waits for it (an `RLock`'s waiters only
//! subscribe), so only waits recorded by clients built with `wait_registry(true)` are seen.

use std::collections::{BTreeMap, HashMap};

use crate::args::ScanArgs;
use crate::commands::leaks::unlock_command;
use crate::connect::{Nodes, Target};
use crate::exit::{Failure, Outcome};
use crate::glob::glob_match;
use crate::inspect::{self, Read};
use crate::keys::{shown, Key};
use crate::model::{CycleStep, Deadlock, DeadlockReport};
use crate::render;
use crate::waits::{self, Wait};

/// The most cycles reported, and the most steps the search takes: a graph of read locks
/// with many holders each could otherwise have more cycles than anyone can read.
const MOST_CYCLES: usize = 100;
const MOST_STEPS: usize = 100_000;

/// Prints every deadlock found; exit code 1 when there is one.
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn run(target: &Target, args: &ScanArgs, json: bool) -> Outcome {
    let nodes = target.connect().await?;
    let report = find(target, &nodes, args).await?;
    let found = !report.deadlocks.is_empty();
    Ok(super::report(&report, json, render::deadlocks, found))
}

/// Reads every registered wait, the holders of each lock waited for, and the cycles.
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn find(
    target: &Target,
    nodes: &Nodes,
    args: &ScanArgs,
) -> Result<DeadlockReport, Failure> {
    let (waits, scan) = waits::every_wait(nodes, args).await?;
    let prefix = target.key_prefix.as_bytes();
    let waits: Vec<Wait> = waits
        .into_iter()
        .filter(|wait| {
            (wait.lock.strip_prefix(prefix))
                .is_some_and(|name| glob_match(&args.pattern, &shown(name)))
        })
        .collect();
    let mut locks: Vec<Key> = waits.iter().map(|wait| wait.lock.clone()).collect();
    locks.sort();
    locks.dedup();
    let now = nodes.server_times().await?;
    let reads = inspect::read_locks(nodes, &target.key_prefix, &locks, &now).await?;
    let holders: HashMap<&Key, Vec<String>> = locks
        .iter()
        .zip(reads)
        .map(|(key, read)| {
            let owners = match read {
                Read::Lock(lock) => lock
                    .holders
                    .iter()
                    .map(|holder| format!("{}:{}", holder.client_id, holder.task_id))
                    .collect(),
                _ => Vec::new(),
            };
            (key, owners)
        })
        .collect();
    let graph = Graph::new(&waits, &holders);
    let deadlocks = graph
        .cycles()
        .into_iter()
        .map(|cycle| describe(target, nodes, &now, &cycle))
        .collect();
    Ok(DeadlockReport {
        deadlocks,
        waits_examined: waits.len(),
        locks_examined: locks.len(),
        scan,
    })
}

/// Who waits for whom: each waiting owner, its wait, and the waiting owners holding the
/// lock it waits for.
struct Graph<'a> {
    /// By owner, in order, so that cycles come out the same on every run.
    waits: BTreeMap<&'a str, (&'a Wait, Vec<&'a str>)>,
}

impl<'a> Graph<'a> {
    fn new(waits: &'a [Wait], holders: &'a HashMap<&Key, Vec<String>>) -> Self {
        let waiting: BTreeMap<&str, &Wait> = waits.iter().map(|w| (w.owner.as_str(), w)).collect();
        let waits = waiting
            .iter()
            .map(|(&owner, &wait)| {
                let next = holders
                    .get(&wait.lock)
                    .into_iter()
                    .flatten()
                    .filter_map(|holder| waiting.get_key_value(holder.as_str()).map(|(k, _)| *k))
                    .filter(|&holder| holder != owner)
                    .collect();
                (owner, (wait, next))
            })
            .collect();
        Graph { waits }
    }

    /// Every elementary cycle (up to [`MOST_CYCLES`]), each once: found from its least
    /// owner, through owners greater than it only.
    fn cycles(&self) -> Vec<Vec<&'a Wait>> {
        let mut found = Vec::new();
        let mut steps = 0;
        for &start in self.waits.keys() {
            let mut path: Vec<(&str, usize)> = vec![(start, 0)];
            while let Some(&mut (owner, ref mut next)) = path.last_mut() {
                steps += 1;
                if steps > MOST_STEPS || found.len() >= MOST_CYCLES {
                    return found;
                }
                let Some(&holder) = self.waits[owner].1.get(*next) else {
                    path.pop();
                    continue;
                };
                *next += 1;
                if holder == start {
                    found.push(path.iter().map(|(owner, _)| self.waits[owner].0).collect());
                } else if holder > start && !path.iter().any(|(seen, _)| *seen == holder) {
                    path.push((holder, 0));
                }
            }
        }
        found
    }
}

/// A cycle as printed: each task, its client, the lock it waits for and who holds it, and
/// the lock to free (the one held by the task whose wait began last).
fn describe(target: &Target, nodes: &Nodes, now: &[i64], cycle: &[&Wait]) -> Deadlock {
    let prefix = target.key_prefix.as_bytes();
    let name = |key: &Key| shown(key.strip_prefix(prefix).unwrap_or(key));
    let steps: Vec<CycleStep> = cycle
        .iter()
        .enumerate()
        .map(|(i, wait)| {
            let record = redis_rlock::protocol::layout::waiting_record(&wait.owner);
            let clock = now[nodes.of_key(record.as_bytes())];
            CycleStep {
                owner: wait.owner.clone(),
                client: wait.client.clone(),
                waits_for: name(&wait.lock),
                node: nodes.nodes[nodes.of_key(&wait.lock)].addr.clone(),
                waited_ms: wait.since_ms.map(|since| clock - since),
                held_by: cycle[(i + 1) % cycle.len()].owner.clone(),
            }
        })
        .collect();
    // The youngest wait's owner gives up the lock the step before it waits for.
    let youngest = (0..cycle.len())
        .max_by_key(|&i| cycle[i].since_ms.unwrap_or(i64::MIN))
        .unwrap_or(0);
    let before = cycle[(youngest + cycle.len() - 1) % cycle.len()];
    let break_lock = name(&before.lock);
    let fix = match std::str::from_utf8(before.lock.strip_prefix(prefix).unwrap_or(&before.lock)) {
        Ok(text) => unlock_command(target, text),
        Err(_) => format!(
            "redis-cli … DEL {}",
            crate::shell::quote_bytes(&before.lock)
        ),
    };
    Deadlock {
        steps,
        break_lock,
        fix,
    }
}

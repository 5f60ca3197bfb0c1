//! `rlock list`: every lock, one line each.

use std::collections::BTreeMap;

use crate::args::ScanArgs;
use crate::connect::{Nodes, Target};
use crate::exit::{Exit, Failure, Outcome};
use crate::inspect;
use crate::keys::Key;
use crate::model::{Listing, LockView};
use crate::render;
use crate::survey::{self, Visit};

/// Prints every lock matching the pattern. Exit code 0, found or not.
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn run(target: &Target, args: &ScanArgs, json: bool) -> Outcome {
    let nodes = target.connect().await?;
    let listing = collect(&nodes, &target.key_prefix, args).await?;
    if json {
        println!("{}", render::json(&listing));
    } else {
        print!("{}", render::listing(&listing));
    }
    Ok(Exit::Ok)
}

/// Walks the keyspace and keeps the first `args.limit` locks by name, counting them all.
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn collect(nodes: &Nodes, key_prefix: &str, args: &ScanArgs) -> Result<Listing, Failure> {
    let mut first = FirstByName {
        limit: args.limit,
        locks: BTreeMap::new(),
        total: 0,
    };
    let walked = survey::walk(nodes, key_prefix, args, false, &mut first).await?;
    let mut synchronizers = Vec::new();
    for key in &walked.synchronizers {
        if let Some(detail) = inspect::read_synchronizer(nodes, key_prefix, key).await? {
            synchronizers.push(detail);
        }
    }
    let locks: Vec<LockView> = first.locks.into_values().collect();
    Ok(Listing {
        truncated: first.total > locks.len(),
        total: first.total,
        locks,
        synchronizers,
        scan: walked.report,
    })
}

/// The first `limit` locks by name, and how many there were: what `list` prints, in
/// memory bounded by `--limit` whatever the number of locks.
struct FirstByName {
    limit: usize,
    /// By name, then key (two keys may show the same name when one is not UTF-8).
    locks: BTreeMap<(String, Key), LockView>,
    total: usize,
}

impl Visit for FirstByName {
    fn lock(&mut self, lock: LockView) {
        self.total += 1;
        self.locks
            .insert((lock.name.clone(), lock.raw_key.clone()), lock);
        if self.locks.len() > self.limit {
            self.locks.pop_last();
        }
    }

    fn latch(&mut self, _: Key, _: Key, _: i64) {}
}

//! `rlock list`: every lock, one line each.

use std::collections::BTreeSet;

use crate::args::ScanArgs;
use crate::connect::{Nodes, Target};
use crate::exit::{Exit, Failure, Outcome};
use crate::inspect::{self, Read};
use crate::model::{Listing, LockView};
use crate::{render, scan};

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

/// Scans and reads every lock, sorted by name, the first `args.limit` kept.
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn collect(nodes: &Nodes, key_prefix: &str, args: &ScanArgs) -> Result<Listing, Failure> {
    let found = scan::find(nodes, key_prefix, args).await?;
    let mut locks = read_found(nodes, key_prefix, &found).await?;
    let total = locks.len();
    locks.truncate(args.limit);
    let mut synchronizers = Vec::new();
    for key in found.synchronizers.iter().take(args.limit) {
        let name = key.strip_prefix(key_prefix).unwrap_or(key);
        if let Some(detail) = inspect::read_synchronizer(nodes, key_prefix, name).await? {
            synchronizers.push(detail);
        }
    }
    Ok(Listing {
        truncated: total > locks.len(),
        total,
        locks,
        synchronizers,
        scan: found.report,
    })
}

/// Every lock the scan found, read, sorted by name (keys that are not locks left out).
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn read_found(
    nodes: &Nodes,
    key_prefix: &str,
    found: &scan::Found,
) -> Result<Vec<LockView>, Failure> {
    let keys: BTreeSet<String> = found
        .hashes
        .iter()
        .chain(found.derived.keys())
        .filter(|key| key.starts_with(key_prefix))
        .cloned()
        .collect();
    let keys: Vec<String> = keys.into_iter().collect();
    let now = nodes.server_times().await?;
    let reads = inspect::read_locks(nodes, key_prefix, &keys, &now).await?;
    let mut locks: Vec<LockView> = reads
        .into_iter()
        .filter_map(|read| match read {
            Read::Lock(lock) => Some(lock),
            _ => None,
        })
        .collect();
    locks.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(locks)
}

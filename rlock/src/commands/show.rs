//! `rlock show NAME`: one lock in full, or a semaphore or latch.

use crate::connect::{Nodes, Target};
use crate::exit::{Exit, Failure, Outcome};
use crate::inspect::{self, Read};
use crate::model::LockDetail;
use crate::render;

/// Prints the lock `name`. Exit code 1 when there is no such lock.
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn run(target: &Target, name: &str, json: bool) -> Outcome {
    let nodes = target.connect().await?;
    let read = match inspect::read_detail(&nodes, &target.key_prefix, name).await? {
        Ok(detail) => {
            if json {
                println!("{}", render::json(&detail));
            } else {
                print!("{}", render::detail(&detail));
            }
            return Ok(Exit::Ok);
        }
        Err(read) => read,
    };
    // Not a lock: a semaphore or a latch, whose layout is a number (or an expirable
    // semaphore's permits).
    let key = format!("{}{name}", target.key_prefix);
    match inspect::read_synchronizer(&nodes, &target.key_prefix, key.as_bytes()).await? {
        Some(detail) => {
            if json {
                println!("{}", render::json(&detail));
            } else {
                print!("{}", render::sync_detail(&detail));
            }
            Ok(Exit::Ok)
        }
        None => {
            eprintln!("rlock: {}", not_found(&target.key_prefix, name, &read));
            Ok(Exit::Found)
        }
    }
}

/// The lock `name` in full; `None`, after saying why on stderr, when there is none.
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn detail(
    nodes: &Nodes,
    key_prefix: &str,
    name: &str,
) -> Result<Option<LockDetail>, Failure> {
    match inspect::read_detail(nodes, key_prefix, name).await? {
        Ok(detail) => Ok(Some(detail)),
        Err(read) => {
            eprintln!("rlock: {}", not_found(key_prefix, name, &read));
            Ok(None)
        }
    }
}

/// Why there is no lock `name` (printable: the name is as given).
pub fn not_found(key_prefix: &str, name: &str, read: &Read) -> String {
    render::printable(&match read {
        Read::NotALock(what) => format!("`{key_prefix}{name}` holds {what}: not a lock"),
        _ => format!("no lock named `{name}` (key `{key_prefix}{name}`)"),
    })
}

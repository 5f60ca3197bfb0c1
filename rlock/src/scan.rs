//! `SCAN`, never `KEYS`: one node at a time (a cluster's keyspace is split over its masters,
//! and `SCAN` walks the node asked), a page per call with a `COUNT` hint, and a bound on the
//! keys walked, so that a call on a large production keyspace does a known amount of work
//! and says when it stopped short. Pages are handed over one at a time ([`Walk`]): the
//! inspector reads each page before it asks for the next, and never holds the keyspace.

use serde::Serialize;

use crate::acl;
use crate::args::ScanArgs;
use crate::connect::Node;
use crate::exit::Failure;
use crate::keys::Key;

/// How complete the scan was.
#[derive(Debug, Serialize)]
pub struct ScanReport {
    /// Whether every pass walked every node's whole keyspace.
    pub complete: bool,
    /// One entry per node and pass.
    pub passes: Vec<PassReport>,
}

/// One scan pass of one node.
#[derive(Debug, Serialize)]
pub struct PassReport {
    /// `host:port`.
    pub node: String,
    /// The `MATCH` pattern (and `TYPE`, if any).
    pub filter: String,
    /// `SCAN` calls made.
    pub calls: u64,
    /// Keys walked, at most (calls × COUNT: Redis filters after walking).
    pub walked: u64,
    /// Whether the cursor came back to 0.
    pub complete: bool,
}

impl ScanReport {
    /// A report of no pass yet: complete until a pass stops short.
    pub fn new() -> Self {
        ScanReport {
            complete: true,
            passes: Vec::new(),
        }
    }

    /// Adds a finished pass.
    pub fn add(&mut self, pass: PassReport) {
        self.complete &= pass.complete;
        self.passes.push(pass);
    }
}

/// One bounded scan pass of one node, a page at a time.
pub struct Walk<'a> {
    node: &'a Node,
    pattern: Key,
    type_filter: Option<&'static str>,
    args: &'a ScanArgs,
    cursor: u64,
    calls: u64,
    walked: u64,
    done: bool,
}

impl<'a> Walk<'a> {
    /// A pass over `node`'s keys matching `pattern` (a Redis glob), of type `type_filter`
    /// when given (`SCAN … TYPE`, filtered by Redis).
    pub fn new(
        node: &'a Node,
        pattern: Key,
        type_filter: Option<&'static str>,
        args: &'a ScanArgs,
    ) -> Self {
        Walk {
            node,
            pattern,
            type_filter,
            args,
            cursor: 0,
            calls: 0,
            walked: 0,
            done: false,
        }
    }

    /// The next page of keys (often empty: Redis filters after walking), or `None` when
    /// the pass is over: the cursor came back to 0, or `--scan-limit` keys were walked.
    ///
    /// # Errors
    /// When the node does not answer, or refuses `SCAN` (an ACL user needs `+scan`).
    pub async fn next_page(&mut self) -> Result<Option<Vec<Key>>, Failure> {
        if self.done {
            return Ok(None);
        }
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(self.cursor)
            .arg("MATCH")
            .arg(&self.pattern)
            .arg("COUNT")
            .arg(self.args.scan_count);
        if let Some(kind) = self.type_filter {
            cmd.arg("TYPE").arg(kind);
        }
        let addr = &self.node.addr;
        let (next, page): (u64, Vec<Key>) = cmd
            .query_async(&mut self.node.conn.clone())
            .await
            .map_err(|e| acl::failure(&format!("SCAN on {addr}"), addr, "scan", None, &e))?;
        self.calls += 1;
        self.walked += self.args.scan_count;
        self.cursor = next;
        self.done = self.cursor == 0 || self.walked >= self.args.scan_limit;
        Ok(Some(page))
    }

    /// How far the pass got.
    pub fn report(&self) -> PassReport {
        let pattern = crate::keys::shown(&self.pattern);
        PassReport {
            node: self.node.addr.clone(),
            filter: match self.type_filter {
                Some(kind) => format!("MATCH {pattern} TYPE {kind}"),
                None => format!("MATCH {pattern}"),
            },
            calls: self.calls,
            walked: self.walked,
            complete: self.cursor == 0,
        }
    }
}

/// The channels matching each of `patterns` that have subscribers on `node` (`PUBSUB
/// CHANNELS`, and `SHARDCHANNELS` on a cluster, whose refusal counts as none).
///
/// # Errors
/// When the node does not answer or refuses `PUBSUB CHANNELS`.
pub async fn channels(
    node: &Node,
    cluster: bool,
    patterns: &[String],
) -> Result<Vec<Key>, Failure> {
    let mut conn = node.conn.clone();
    let mut found = Vec::new();
    for pattern in patterns {
        let classic: Vec<Key> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg(pattern)
            .query_async(&mut conn)
            .await
            .map_err(|e| {
                let context = format!("PUBSUB CHANNELS on {}", node.addr);
                acl::failure(&context, &node.addr, "pubsub|channels", None, &e)
            })?;
        found.extend(classic);
        if cluster {
            let sharded: Vec<Key> = redis::cmd("PUBSUB")
                .arg("SHARDCHANNELS")
                .arg(pattern)
                .query_async(&mut conn)
                .await
                .unwrap_or_default();
            found.extend(sharded);
        }
    }
    Ok(found)
}

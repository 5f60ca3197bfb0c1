//! Whether a [`RedLock`](crate::RedLock)'s locks are on independent masters: a majority is
//! worth something only over masters that fail and forget independently.
//!
//! - **One Redis per client**: the clients' URLs must differ (two URLs that reach one
//!   server, such as a host name and its address, are not caught).
//! - **Sentinel clients**: two that name one master (the same name at a sentinel they
//!   share) are one voter; sharing sentinels is fine, since one sentinel set watches many
//!   masters. A Sentinel client and a client given the master's address directly are
//!   caught too (the address as the sentinels name it).
//! - **Redis Cluster clients**: a cluster is one voter, however many masters it has (its
//!   masters share a failover mechanism, and a client of it sees only one place for a
//!   key). Two cluster clients may not share a seed URL, and at the group's first call
//!   each is asked which nodes its cluster is made of (`CLUSTER SLOTS` on any node, within
//!   the group's node timeout): two that list a node in common reach the same cluster,
//!   whatever seeds they were given. A cluster that does not answer in time is asked again
//!   at the next call (a `RedLock` must work with a minority down); once every cluster
//!   answered, the group does not ask again.
//!
//! Refusals are [`Error::InvalidArgument`], with nothing sent but those questions.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::future::join_all;

use crate::config::server_url::ServerUrl;
use crate::config::settings::Topology;
use crate::error::{Error, Result};
use crate::groups::group::Node;
use crate::services::cluster_epoch::node_ids;

/// What one group knows of its locks' independence.
#[derive(Debug, Default)]
pub(crate) struct Independence {
    /// Set once every cluster client answered and none shares a node with another: the
    /// group's locks do not change, so the answer holds for good.
    settled: AtomicBool,
}

impl Independence {
    /// Checks that `nodes` are on independent masters (see the module docs); `group` names
    /// the group kind in errors.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for two locks on one master or one cluster.
    pub(crate) async fn check(
        &self,
        nodes: &[Node],
        group: &str,
        node_timeout: Duration,
    ) -> Result<()> {
        if self.settled.load(Ordering::Acquire) {
            return Ok(());
        }
        // Every place a lock's client reaches, and which lock named it first.
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            for (place, shown) in places(node) {
                if seen.insert(place, i).is_some_and(|j| j != i) {
                    return Err(Error::invalid(format!(
                        "a {group} needs one lock per independent master; {shown} is given twice"
                    )));
                }
            }
        }
        // The URLs differ: ask each cluster which nodes it is made of.
        let clusters: Vec<&Node> = nodes
            .iter()
            .filter(|node| node.core.connections.is_cluster())
            .collect();
        if clusters.len() < 2 {
            self.settled.store(true, Ordering::Release);
            return Ok(());
        }
        let asked = join_all(clusters.iter().map(|node| async move {
            let ask = node
                .core
                .connections
                .once(|conn| async move { node_ids(&conn).await });
            match tokio::time::timeout(node_timeout, ask).await {
                Ok(Ok(ids)) => ids,
                _ => None,
            }
        }))
        .await;
        let mut answered: Vec<(&Node, BTreeSet<String>)> = Vec::new();
        for (node, ids) in clusters.iter().zip(asked) {
            let Some(ids) = ids else { continue };
            if let Some((other, _)) = answered.iter().find(|(_, seen)| !seen.is_disjoint(&ids)) {
                return Err(Error::invalid(format!(
                    "a {group} needs one lock per independent master; `{}` and `{}` reach \
                     the same Redis Cluster",
                    other.core.settings.url, node.core.settings.url
                )));
            }
            answered.push((node, ids));
        }
        if answered.len() == clusters.len() {
            self.settled.store(true, Ordering::Release);
        }
        Ok(())
    }
}

/// The places a lock's client reaches, compared raw, each with how an error shows it: its
/// one URL, or its cluster's seeds; for a Sentinel client, the master's name at each
/// sentinel (one sentinel set watches many masters: sharing a sentinel is no conflict,
/// sharing a master is) and the master's current address, which a client given that
/// master's URL directly also reaches.
fn places(node: &Node) -> Vec<(String, String)> {
    let url = |url: &ServerUrl| (url.raw().to_string(), format!("`{url}`"));
    match &node.core.settings.topology {
        Topology::Cluster { seeds } => seeds.iter().map(url).collect(),
        Topology::Sentinel {
            sentinels,
            master_name,
        } => {
            let mut places: Vec<(String, String)> = sentinels
                .iter()
                .map(|sentinel| {
                    (
                        format!("{master_name}@{}", sentinel.raw()),
                        format!("the Sentinel master `{master_name}` at `{sentinel}`"),
                    )
                })
                .collect();
            if let Some(watch) = node.core.connections.master_watch() {
                places.push(url(&watch.current().url));
            }
            places
        }
        Topology::Standalone => vec![url(&node.core.settings.url)],
    }
}

//! [`SlotMap`]: which master serves each hash slot of a Redis Cluster, read with
//! `CLUSTER SLOTS` and parsed once for every user (the batcher, the unlock listener, replica
//! sync, the cluster epoch watch), and [`Owners`], the map the batcher groups by, read again
//! when it goes stale.

use std::collections::BTreeSet;
use std::fmt;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{Cmd, ErrorKind, RedisResult, Value};
use tokio::sync::Notify;

use crate::protocol::conn::Conn;
use crate::protocol::slot::{key_slot, SLOTS};
use crate::util::poison;

/// A cluster node's announced address.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct NodeAddr {
    pub(crate) host: Arc<str>,
    pub(crate) port: u16,
}

impl fmt::Display for NodeAddr {
    /// `host:port`, as redis-rs names a cluster's nodes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Which master serves each hash slot of a Redis Cluster, and which nodes the cluster is
/// made of, read with `CLUSTER SLOTS`: how batches are grouped per master, where the unlock
/// listener subscribes, which renewals a master's replicas void, and whether two clients
/// reach one cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SlotMap {
    /// Sorted by first slot: the first and last slot of a range, and its master.
    ranges: Vec<(u16, u16, NodeAddr)>,
    /// Every node listed (replicas too), to read the map again from when the nodes known
    /// first are gone.
    nodes: Vec<NodeAddr>,
    /// The ids of every node listed: two clients of one cluster share some, two clusters
    /// none.
    pub(crate) ids: BTreeSet<String>,
}

impl SlotMap {
    /// The master serving the slot of `channel` (all of one lock's names share a slot), or
    /// `None` when no node serves it (the cluster is down there).
    pub(crate) fn master_of(&self, channel: &str) -> Option<&NodeAddr> {
        self.owner(key_slot(channel.as_bytes()))
    }

    /// The master serving `slot`, or `None` when none does.
    pub(crate) fn owner(&self, slot: u16) -> Option<&NodeAddr> {
        let after = self.ranges.partition_point(|&(start, _, _)| start <= slot);
        let (_, end, master) = self.ranges.get(after.checked_sub(1)?)?;
        (slot <= *end).then_some(master)
    }

    /// Whether `node` serves slots.
    pub(crate) fn is_master(&self, node: &NodeAddr) -> bool {
        self.ranges.iter().any(|(_, _, master)| master == node)
    }

    /// The slot ranges (inclusive) served by the masters named `nodes` (`host:port`).
    pub(crate) fn ranges_of(&self, nodes: &[String]) -> Vec<(u16, u16)> {
        self.ranges
            .iter()
            .filter(|(_, _, master)| nodes.contains(&master.to_string()))
            .map(|&(start, end, _)| (start, end))
            .collect()
    }

    /// Every node the map lists, masters and replicas.
    pub(crate) fn nodes(&self) -> &[NodeAddr] {
        &self.nodes
    }

    /// Reads the map with `CLUSTER SLOTS` from any node of `conn`'s cluster, hosts as
    /// announced (redis-rs names nodes by the addresses `CLUSTER SLOTS` gives).
    ///
    /// # Errors
    /// The node's error, or an unexpected reply.
    pub(crate) async fn read(conn: &Conn) -> RedisResult<SlotMap> {
        let reply = conn.clone().query_one_node(&cluster_slots()).await?;
        SlotMap::parse(&reply, "").map_err(|e| {
            (
                ErrorKind::UnexpectedReturnType,
                "unexpected CLUSTER SLOTS reply",
                e,
            )
                .into()
        })
    }

    /// Parses a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, ...], [replica host,
    /// port, ...]...], ...]`. A node announced with an empty host (or `?`: its address is
    /// unknown) is the node that answered, at `asked_host`, as redis-rs reads it.
    pub(crate) fn parse(reply: &Value, asked_host: &str) -> Result<SlotMap, String> {
        let Value::Array(entries) = reply else {
            return Err(format!("expected an array, got {reply:?}"));
        };
        let mut map = SlotMap::default();
        for entry in entries {
            let Value::Array(fields) = entry else {
                return Err(format!("expected a slot range, got {entry:?}"));
            };
            let (Some(start), Some(end)) = (fields.first(), fields.get(1)) else {
                return Err(format!("a slot range without bounds: {entry:?}"));
            };
            let (start, end) = (slot(start)?, slot(end)?);
            let mut listed = fields[2..]
                .iter()
                .map(|n| node(n, asked_host))
                .collect::<Result<Vec<_>, _>>()?;
            let Some((master, _)) = listed.first().cloned() else {
                return Err(format!("slots {start}-{end} have no master"));
            };
            // The replicas first, then the master: the order the map is read again from.
            listed.rotate_left(1);
            for (node, id) in listed {
                map.ids.extend(id);
                if !map.nodes.contains(&node) {
                    map.nodes.push(node);
                }
            }
            map.ranges.push((start, end, master));
        }
        map.ranges.sort_by_key(|&(start, _, _)| start);
        Ok(map)
    }
}

/// `CLUSTER SLOTS`.
pub(crate) fn cluster_slots() -> Cmd {
    let mut slots = redis::cmd("CLUSTER");
    slots.arg("SLOTS");
    slots
}

fn slot(value: &Value) -> Result<u16, String> {
    match value {
        Value::Int(n) => u16::try_from(*n)
            .ok()
            .filter(|s| *s < SLOTS)
            .ok_or_else(|| format!("slot {n} out of range")),
        other => Err(format!("expected a slot number, got {other:?}")),
    }
}

/// A node's address, and its id when listed.
fn node(value: &Value, asked_host: &str) -> Result<(NodeAddr, Option<String>), String> {
    let Value::Array(fields) = value else {
        return Err(format!("expected a node, got {value:?}"));
    };
    let text = |field: Option<&Value>| match field {
        Some(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Some(Value::SimpleString(text)) => Some(text.clone()),
        _ => None,
    };
    let Some(host) = text(fields.first()) else {
        return Err(format!("expected a node's host, got {:?}", fields.first()));
    };
    let host = if host.is_empty() || host == "?" {
        asked_host.to_string()
    } else {
        host
    };
    let port = match fields.get(1) {
        Some(Value::Int(port)) => {
            u16::try_from(*port).map_err(|_| format!("port {port} out of range"))?
        }
        other => return Err(format!("expected a node's port, got {other:?}")),
    };
    let addr = NodeAddr {
        host: host.into(),
        port,
    };
    Ok((addr, text(fields.get(2))))
}

/// The slot map a cluster client's batcher groups by, read at the first batch and read
/// again when a call finds an item's slot served by another node than the map said (a
/// failover, a migration): until then such items cost a resend each, never a wrong answer.
#[derive(Default)]
pub(crate) struct Owners {
    state: Mutex<OwnersState>,
    /// Told when a read ends, for batches waiting for the first map.
    read_done: Notify,
}

#[derive(Default)]
struct OwnersState {
    map: Option<Arc<SlotMap>>,
    /// The map may be out of date: read it again.
    stale: bool,
    /// When the last read began; `None` before the first.
    read_at: Option<Instant>,
    reading: bool,
}

/// The least time between two reads of the slot map: while a slot migrates, items of it
/// keep finding their keys elsewhere, and the map says so only once it is done.
const REREAD_AFTER: Duration = Duration::from_secs(1);

impl Owners {
    /// The map to group a batch by. Before there is one, the batch waits for the first read
    /// (one round trip, once; a batch that goes out meanwhile waits for the same read, or
    /// it would go out per slot). Later, a stale map is read again in the background, at
    /// most once per [`REREAD_AFTER`], and used meanwhile. `None` when no read succeeded.
    pub(crate) async fn map(
        self: &Arc<Self>,
        conn: &Conn,
        runtime: &tokio::runtime::Handle,
    ) -> Option<Arc<SlotMap>> {
        loop {
            // Registered before the state is looked at, so that a read ending in between
            // is not missed.
            let mut read_done = pin!(self.read_done.notified());
            read_done.as_mut().enable();
            let (map, due, reading) = {
                let mut state = poison::locked(&self.state);
                let due = (state.map.is_none() || state.stale)
                    && !state.reading
                    && !matches!(state.read_at, Some(at) if at.elapsed() < REREAD_AFTER);
                if due {
                    (state.reading, state.read_at) = (true, Some(Instant::now()));
                }
                (state.map.clone(), due, state.reading)
            };
            match (map, due) {
                (None, true) => return self.read(conn.clone()).await,
                (None, false) if reading => read_done.await,
                (Some(map), true) => {
                    let (owners, conn) = (self.clone(), conn.clone());
                    runtime.spawn(async move { owners.read(conn).await });
                    return Some(map);
                }
                (map, _) => return map,
            }
        }
    }

    /// Notes that an item's slot was not served where the map said.
    pub(crate) fn stale(&self) {
        poison::locked(&self.state).stale = true;
    }

    /// Reads the map (`CLUSTER SLOTS`, from any node), after [`map`](Self::map) found it
    /// due, and returns it. A failed read keeps the map as it was, to be read again later.
    async fn read(&self, conn: Conn) -> Option<Arc<SlotMap>> {
        let map = match SlotMap::read(&conn).await {
            Ok(map) => Some(map),
            Err(e) => {
                tracing::debug!(error = %e, "no slot map to group batches by");
                None
            }
        };
        let map = {
            let mut state = poison::locked(&self.state);
            state.reading = false;
            if let Some(map) = map {
                (state.map, state.stale) = (Some(Arc::new(map)), false);
            }
            state.map.clone()
        };
        self.read_done.notify_waiters();
        map
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A node as Redis 7 lists it: host, port, id and its networking metadata.
    fn node(host: &str, port: i64, id: &str) -> Value {
        Value::Array(vec![
            Value::BulkString(host.as_bytes().to_vec()),
            Value::Int(port),
            Value::BulkString(id.as_bytes().to_vec()),
            Value::Array(vec![]),
        ])
    }

    fn range(start: i64, end: i64, nodes: Vec<Value>) -> Value {
        let mut fields = vec![Value::Int(start), Value::Int(end)];
        fields.extend(nodes);
        Value::Array(fields)
    }

    /// A `CLUSTER SLOTS` reply: each range's first and last slot and its master's port.
    fn slots_reply(ranges: &[(i64, i64, i64)]) -> Value {
        let master = |port| vec![node("127.0.0.1", port, &format!("id{port}"))];
        let ranges = ranges
            .iter()
            .map(|&(start, end, port)| range(start, end, master(port)));
        Value::Array(ranges.collect())
    }

    /// A slot map from `slots_reply`.
    pub(crate) fn map_of(ranges: &[(i64, i64, i64)]) -> SlotMap {
        SlotMap::parse(&slots_reply(ranges), "").unwrap()
    }

    #[test]
    fn owners_place_slots_on_their_masters() {
        let owners = map_of(&[(8192, 16383, 2), (0, 99, 1), (100, 8191, 2)]);
        assert_eq!(owners.owner(0), owners.owner(99));
        assert_ne!(owners.owner(99), owners.owner(100));
        assert_eq!(owners.owner(100), owners.owner(16383));
        let part = map_of(&[(0, 99, 1)]);
        assert_eq!(part.owner(100), None);
        assert!(SlotMap::parse(&Value::Int(1), "").is_err());
    }

    #[test]
    fn channels_map_to_the_master_of_their_slot() {
        let reply = Value::Array(vec![
            range(
                8192,
                16383,
                vec![node("10.0.0.2", 7001, "id"), node("10.0.0.4", 7003, "id")],
            ),
            range(
                0,
                8191,
                vec![node("", 7000, "id"), node("10.0.0.3", 7002, "id")],
            ),
        ]);
        let map = SlotMap::parse(&reply, "10.0.0.1").unwrap();
        let at = |host: &str, port| NodeAddr {
            host: host.into(),
            port,
        };
        // Slot 0 of "123456789"'s CRC is 0x31c3 = 12739: the second range.
        assert_eq!(map.master_of("123456789"), Some(&at("10.0.0.2", 7001)));
        let low = (0..)
            .map(|i| format!("k{i}"))
            .find(|k| key_slot(k.as_bytes()) < 8192)
            .unwrap();
        assert_eq!(map.master_of(&low), Some(&at("10.0.0.1", 7000)));
        assert!(map.is_master(&at("10.0.0.1", 7000)));
        assert!(!map.is_master(&at("10.0.0.3", 7002)));
        assert_eq!(map.nodes().len(), 4);
    }

    #[test]
    fn reads_node_ids_and_the_ranges_of_masters() {
        let node = |port, id| node("127.0.0.1", port, id);
        let reply = Value::Array(vec![
            range(0, 8191, vec![node(7000, "a"), node(7003, "d")]),
            range(8192, 16383, vec![node(7001, "b")]),
        ]);
        let map = SlotMap::parse(&reply, "h").unwrap();
        let ids: Vec<&str> = map.ids.iter().map(String::as_str).collect();
        assert_eq!(ids, ["a", "b", "d"]);
        assert_eq!(map.ranges_of(&["127.0.0.1:7001".into()]), [(8192, 16383)]);
        assert!(map.ranges_of(&["127.0.0.1:7003".into()]).is_empty());
    }

    #[test]
    fn unserved_slots_have_no_master() {
        let reply = Value::Array(vec![range(0, 99, vec![node("h", 1, "id")])]);
        let map = SlotMap::parse(&reply, "h").unwrap();
        let unserved = (0..)
            .map(|i| format!("k{i}"))
            .find(|k| key_slot(k.as_bytes()) >= 100)
            .unwrap();
        assert_eq!(map.master_of(&unserved), None);
        assert!(SlotMap::parse(&Value::Int(1), "h").is_err());
    }
}

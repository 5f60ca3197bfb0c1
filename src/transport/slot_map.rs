//! [`SlotMap`]: which master serves each hash slot of a Redis Cluster, and which nodes the
//! cluster is made of, read with `CLUSTER SLOTS`: where the unlock listener subscribes, which
//! renewals a master's replicas void, and whether two clients reach one cluster.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use redis::Value;

use crate::protocol::key_slot;

/// A cluster node's announced address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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

/// One range of slots and its master.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Range {
    start: u16,
    end: u16,
    master: NodeAddr,
}

/// The slot ranges of a cluster, sorted, with their masters; and every node listed (replicas
/// too), to read the map again from when the nodes known first are gone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SlotMap {
    ranges: Vec<Range>,
    nodes: Vec<NodeAddr>,
    /// The ids of every node listed: two clients of one cluster share some, two clusters
    /// none.
    pub(crate) ids: BTreeSet<String>,
}

impl SlotMap {
    /// The master serving the slot of `channel` (all of one lock's names share a slot), or
    /// `None` when no node serves it (the cluster is down there).
    pub(crate) fn master_of(&self, channel: &str) -> Option<&NodeAddr> {
        let slot = key_slot(channel.as_bytes());
        let after = self.ranges.partition_point(|r| r.start <= slot);
        let range = self.ranges.get(after.checked_sub(1)?)?;
        (slot <= range.end).then_some(&range.master)
    }

    /// Whether `node` serves slots.
    pub(crate) fn is_master(&self, node: &NodeAddr) -> bool {
        self.ranges.iter().any(|r| r.master == *node)
    }

    /// The slot ranges (inclusive) served by the masters named `nodes` (`host:port`).
    pub(crate) fn ranges_of(&self, nodes: &[String]) -> Vec<(u16, u16)> {
        self.ranges
            .iter()
            .filter(|r| nodes.contains(&r.master.to_string()))
            .map(|r| (r.start, r.end))
            .collect()
    }

    /// Every node the map lists, masters and replicas.
    pub(crate) fn nodes(&self) -> &[NodeAddr] {
        &self.nodes
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
            map.ranges.push(Range { start, end, master });
        }
        map.ranges.sort_by_key(|r| r.start);
        Ok(map)
    }
}

fn slot(value: &Value) -> Result<u16, String> {
    match value {
        Value::Int(n) => u16::try_from(*n)
            .ok()
            .filter(|s| *s < 16384)
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

#[cfg(test)]
mod tests {
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

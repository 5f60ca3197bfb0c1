//! Redis Cluster hash slots: which slot a key lives in, and grouping work by slot, so that
//! a script call on a cluster never names keys of two slots (Redis would refuse it with
//! `CROSSSLOT`), or by the master serving them ([`node_batches`]).

use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Value;
use tokio::sync::Notify;

use crate::error::Error;
use crate::protocol::conn::Conn;
use crate::protocol::names::SplitName;
use crate::util::poison;

/// The number of hash slots of a Redis Cluster.
const SLOTS: u16 = 16384;

/// The hash slot of `key`, as Redis Cluster computes it: CRC16 (XMODEM) of the key's hash
/// tag (the text between the first `{` and the next `}`, when not empty) or of the whole
/// key, modulo 16384. See <https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags>.
///
/// A lock's keys all live in the slot of its key (the key prefix and the lock name):
///
/// ```
/// use redis_rlock::protocol::key_slot;
/// assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
/// assert_eq!(key_slot(b"order:1001"), key_slot(b"redisson_lock__channel:{order:1001}"));
/// ```
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % SLOTS
}

/// The part of `key` Redis hashes when it has a valid hash tag.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let close = key[open + 1..].iter().position(|&b| b == b'}')?;
    let tag = &key[open + 1..open + 1 + close];
    (!tag.is_empty()).then_some(tag)
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), bit by bit: keys are short,
/// and this runs once per lock handle and once per key of a renewal round.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// `items` as the batches of script calls: runs of at most `size` (at least 1), in slot
/// order, each of one hash slot (by the slot of `key(item)`) when `per_slot` (on a cluster,
/// where a script call may name one slot's keys only), each keeping the items' order.
pub(crate) fn batches<T>(
    items: impl IntoIterator<Item = T>,
    per_slot: bool,
    size: usize,
    key: impl Fn(&T) -> &[u8],
) -> Vec<Vec<T>> {
    let mut groups: BTreeMap<u16, Vec<Vec<T>>> = BTreeMap::new();
    for item in items {
        let slot = if per_slot { key_slot(key(&item)) } else { 0 };
        let runs = groups.entry(slot).or_default();
        match runs.last_mut() {
            Some(run) if run.len() < size => run.push(item),
            _ => runs.push(vec![item]),
        }
    }
    groups.into_values().flatten().collect()
}

/// Which master serves each hash slot, as one `CLUSTER SLOTS` answered: enough to group
/// work per node. (The transport's slot map, with addresses and replicas, is a layer up.)
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct SlotOwners {
    /// Sorted by first slot: the first and last slot of a range, and its master's index.
    ranges: Vec<(u16, u16, usize)>,
}

impl SlotOwners {
    /// Reads a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, ...], replicas...],
    /// ...]`. Masters are told apart by their entry (address and id) as announced; `None`
    /// for a reply of another shape.
    pub(crate) fn parse(reply: &Value) -> Option<SlotOwners> {
        let Value::Array(entries) = reply else {
            return None;
        };
        let mut masters: Vec<&Value> = Vec::new();
        let mut ranges = Vec::with_capacity(entries.len());
        for entry in entries {
            let Value::Array(fields) = entry else {
                return None;
            };
            let slot = |field: Option<&Value>| match field {
                Some(Value::Int(n)) => u16::try_from(*n).ok().filter(|&s| s < SLOTS),
                _ => None,
            };
            let (start, end, master) =
                (slot(fields.first())?, slot(fields.get(1))?, fields.get(2)?);
            let index = match masters.iter().position(|known| *known == master) {
                Some(index) => index,
                None => {
                    masters.push(master);
                    masters.len() - 1
                }
            };
            ranges.push((start, end, index));
        }
        ranges.sort_unstable();
        Some(SlotOwners { ranges })
    }

    /// The index of the master serving `slot`, or `None` when none does.
    fn owner(&self, slot: u16) -> Option<usize> {
        let after = self.ranges.partition_point(|&(start, _, _)| start <= slot);
        let &(_, end, master) = self.ranges.get(after.checked_sub(1)?)?;
        (slot <= end).then_some(master)
    }
}

/// The node a batch's items are grouped by: a master of the map, or, for a slot the map
/// does not place (no map yet, or no master), the slot alone.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Master(usize),
    Unplaced(u16),
}

/// `items` as the script calls of a batch on a cluster: grouped by the master `owners` says
/// serves their slot (per slot without a map), at most `size` (at least 1) to a call, each
/// call's items ordered by slot, keeping their order within a slot. Each call comes with
/// how many of its items are of its first slot: the keys it declares, which route it to
/// that slot's master; the others it passes undeclared (see `lua/acquire.lua`).
pub(crate) fn node_batches<T>(
    items: impl IntoIterator<Item = T>,
    owners: Option<&SlotOwners>,
    size: usize,
    key: impl Fn(&T) -> &[u8],
) -> Vec<(Vec<T>, usize)> {
    let mut nodes: BTreeMap<Node, Vec<(u16, T)>> = BTreeMap::new();
    for item in items {
        let slot = key_slot(key(&item));
        let node = owners
            .and_then(|owners| owners.owner(slot))
            .map_or(Node::Unplaced(slot), Node::Master);
        nodes.entry(node).or_default().push((slot, item));
    }
    let mut calls = Vec::with_capacity(nodes.len());
    for mut items in nodes.into_values() {
        items.sort_by_key(|&(slot, _)| slot);
        let mut rest = items.into_iter().peekable();
        while let Some(&(first, _)) = rest.peek() {
            let run: Vec<(u16, T)> = rest.by_ref().take(size.max(1)).collect();
            let declared = run.iter().take_while(|&&(slot, _)| slot == first).count();
            calls.push((run.into_iter().map(|(_, item)| item).collect(), declared));
        }
    }
    calls
}

/// The slot owners a cluster client's batcher groups by, read at the first batch and read
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
    map: Option<Arc<SlotOwners>>,
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
    ) -> Option<Arc<SlotOwners>> {
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
    async fn read(&self, mut conn: Conn) -> Option<Arc<SlotOwners>> {
        let mut slots = redis::cmd("CLUSTER");
        slots.arg("SLOTS");
        let map = match conn.query_one_node(&slots).await {
            Ok(reply) => SlotOwners::parse(&reply),
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

impl SplitName {
    /// [`Error::CrossSlotName`] for the lock or synchronizer whose key is `key`.
    pub(crate) fn error(&self, key: &str) -> Error {
        Error::cross_slot(key, self.key_slot, self.name.clone(), self.slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::cluster_routing::Slot;

    #[test]
    fn slots_match_redis_rs() {
        for key in [
            "order:1001",
            "redisson_lock__channel:{order:1001}",
            "{user1000}.following",
            "a{b",
            "{}x",
            "foo{}{bar}",
            "foo{{bar}}zap",
            "foo{bar}{zap}",
            "",
            "a",
            "{user1000}.followers",
            "redisson_lock__channel:{my-lock}",
        ] {
            assert_eq!(
                Slot::new(key_slot(key.as_bytes())),
                Some(Slot::for_key(key)),
                "{key:?}"
            );
        }
        assert_eq!(key_slot(b"123456789"), 0x31c3 % SLOTS);
    }

    #[test]
    fn groups_keep_order_within_a_slot() {
        let groups = batches(["{a}1", "{b}1", "{a}2", "{b}2"], true, 2, |k| k.as_bytes());
        assert_eq!(groups.len(), 2);
        for group in groups {
            assert_eq!(group.len(), 2);
            assert!(group[0].ends_with('1') && group[1].ends_with('2'));
        }
    }

    #[test]
    fn batches_are_cut_to_size() {
        let cut = batches(1..=5, false, 2, |_| b"");
        assert_eq!(cut, [vec![1, 2], vec![3, 4], vec![5]]);
        assert!(batches(Vec::<u8>::new(), false, 2, |_| b"").is_empty());
    }

    /// A `CLUSTER SLOTS` reply: each range's first and last slot and its master's port.
    fn slots_reply(ranges: &[(i64, i64, i64)]) -> Value {
        let range = |&(start, end, port): &(i64, i64, i64)| {
            let master = vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(format!("id{port}").into_bytes()),
            ];
            Value::Array(vec![
                Value::Int(start),
                Value::Int(end),
                Value::Array(master),
            ])
        };
        Value::Array(ranges.iter().map(range).collect())
    }

    #[test]
    fn owners_place_slots_on_their_masters() {
        let reply = slots_reply(&[(8192, 16383, 2), (0, 99, 1), (100, 8191, 2)]);
        let owners = SlotOwners::parse(&reply).unwrap();
        assert_eq!(owners.owner(0), owners.owner(99));
        assert_ne!(owners.owner(99), owners.owner(100));
        assert_eq!(owners.owner(100), owners.owner(16383));
        let part = SlotOwners::parse(&slots_reply(&[(0, 99, 1)])).unwrap();
        assert_eq!(part.owner(100), None);
        assert!(SlotOwners::parse(&Value::Int(1)).is_none());
    }

    #[test]
    fn batches_go_one_per_master_declaring_their_first_slot() {
        let owners = SlotOwners::parse(&slots_reply(&[(0, 8191, 1), (8192, 16383, 2)])).unwrap();
        let keys: Vec<String> = (0..64).map(|i| format!("k{i}")).collect();
        let calls = node_batches(keys, Some(&owners), 256, |k| k.as_bytes());
        assert_eq!(calls.len(), 2);
        for (items, declared) in &calls {
            let slots: Vec<u16> = items.iter().map(|k| key_slot(k.as_bytes())).collect();
            assert!(slots
                .iter()
                .all(|&s| owners.owner(s) == owners.owner(slots[0])));
            assert!(slots.windows(2).all(|w| w[0] <= w[1]), "{slots:?}");
            assert_eq!(*declared, slots.iter().filter(|&&s| s == slots[0]).count());
        }
    }

    #[test]
    fn node_batches_keep_order_within_a_slot_and_are_cut_to_size() {
        // `{b}` hashes to slot 3300, `{a}` to 15495.
        let keys = ["{a}1", "{b}1", "{a}2", "{b}2", "{a}3"];
        let one_master = SlotOwners::parse(&slots_reply(&[(0, 16383, 1)])).unwrap();
        assert_eq!(
            node_batches(keys, Some(&one_master), 3, |k| k.as_bytes()),
            [(vec!["{b}1", "{b}2", "{a}1"], 2), (vec!["{a}2", "{a}3"], 2)]
        );
        // Without a map, a call per slot.
        assert_eq!(
            node_batches(keys, None, 2, |k| k.as_bytes()),
            [
                (vec!["{b}1", "{b}2"], 2),
                (vec!["{a}1", "{a}2"], 2),
                (vec!["{a}3"], 1)
            ]
        );
    }
}

//! Redis Cluster hash slots: which slot a key lives in, and grouping work by slot, so that
//! a script call on a cluster never names keys of two slots (Redis would refuse it with
//! `CROSSSLOT`), or by the master serving them ([`node_batches`]), as the cluster's
//! [`SlotMap`] says.
//!
//! [`SlotMap`]: crate::protocol::slot_map::SlotMap

use std::collections::BTreeMap;

use crate::error::Error;
use crate::protocol::names::SplitName;
use crate::protocol::slot_map::{NodeAddr, SlotMap};

/// The number of hash slots of a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

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
    // Off a cluster every item counts as of one slot, that of the empty key.
    let runs = node_batches(
        items,
        None,
        size,
        |item| if per_slot { key(item) } else { b"" },
    );
    runs.into_iter().map(|(run, _)| run).collect()
}

/// `items` as the script calls of a batch on a cluster: grouped by the master `map` says
/// serves their slot (per slot without a map), at most `size` (at least 1) to a call, each
/// call's items ordered by slot, keeping their order within a slot. Each call comes with
/// how many of its items are of its first slot: the keys it declares, which route it to
/// that slot's master; the others it passes undeclared (see `lua/acquire.lua`).
pub(crate) fn node_batches<T>(
    items: impl IntoIterator<Item = T>,
    map: Option<&SlotMap>,
    size: usize,
    key: impl Fn(&T) -> &[u8],
) -> Vec<(Vec<T>, usize)> {
    // By the master of the items' slot; a slot the map does not place (no map yet, or no
    // master), alone.
    let mut nodes: BTreeMap<Result<&NodeAddr, u16>, Vec<(u16, T)>> = BTreeMap::new();
    for item in items {
        let slot = key_slot(key(&item));
        let node = map.and_then(|map| map.owner(slot)).ok_or(slot);
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

impl SplitName {
    /// [`Error::CrossSlotName`] for the lock or synchronizer whose key is `key`.
    pub(crate) fn error(&self, key: &str) -> Error {
        Error::cross_slot(key, self.key_slot, self.name.clone(), self.slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::slot_map::tests::map_of;
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

    #[test]
    fn batches_go_one_per_master_declaring_their_first_slot() {
        let owners = map_of(&[(0, 8191, 1), (8192, 16383, 2)]);
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
        let one_master = map_of(&[(0, 16383, 1)]);
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

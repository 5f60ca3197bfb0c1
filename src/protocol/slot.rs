//! Redis Cluster hash slots: which slot a key lives in, and grouping work by slot, so that
//! a script call on a cluster never names keys of two slots (Redis would refuse it with
//! `CROSSSLOT`).

use std::collections::BTreeMap;

use crate::error::Error;
use crate::protocol::names::SplitName;

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
}

//! The layout's names, checked against Redisson's.

use super::*;
use crate::protocol::kinds::fair::FAIR;
use crate::protocol::kinds::fenced::FENCED;
use crate::protocol::kinds::read_write::{READ, WRITE};
use crate::protocol::kinds::reentrant::REENTRANT;

/// Every synchronizer kind.
const SYNC_KINDS: [SyncKind; 3] = [
    SyncKind::Semaphore,
    SyncKind::ExpirableSemaphore,
    SyncKind::Latch,
];

#[test]
fn names_follow_redisson() {
    let names = LockNames::new(&REENTRANT, "", "order:1001");
    assert_eq!(&*names.key, "order:1001");
    assert_eq!(&*names.channel, "redisson_lock__channel:{order:1001}");
}

#[test]
fn fair_names_follow_redisson() {
    let names = LockNames::new(&FAIR, "", "jobs");
    let [queue, deadlines] = &*names.kept else {
        panic!("a queue and its deadlines");
    };
    assert_eq!(&**queue, "redisson_lock_queue:{jobs}");
    assert_eq!(&**deadlines, "redisson_lock_timeout:{jobs}");
    assert_eq!(
        &*names.wait_channel("u:7"),
        "redisson_lock__channel:{jobs}:u:7"
    );
    assert_eq!(
        &*LockNames::new(&REENTRANT, "", "jobs").wait_channel("u:7"),
        "redisson_lock__channel:{jobs}"
    );
}

#[test]
fn read_write_names_follow_redisson() {
    let read = LockNames::new(&READ, "", "doc:7");
    assert_eq!(&*read.key, "doc:7");
    assert_eq!(&*read.channel, "redisson_rwlock:{doc:7}");
    assert_eq!(
        read.read_timeouts("u:7").as_deref(),
        Some("{doc:7}:u:7:rwlock_timeout")
    );
    assert_eq!(&*read.owner_field(&"u:7".into()), "u:7");
    let write = LockNames::new(&WRITE, "app:", "{doc}:7");
    assert_eq!(&*write.channel, "redisson_rwlock:app:{doc}:7");
    assert_eq!(&*write.owner_field(&"u:7".into()), "u:7:write");
    assert_eq!(write.read_timeouts("u:7"), None);
    assert_eq!(write.kind.side, Some(Side::Write));
    assert_eq!(&*write.kept[0], "app:{doc}:7");
}

#[test]
fn derived_names_share_the_key_slot_unless_braces_split_them() {
    for name in ["order:1001", "{user42}:cart", "x{y}z"] {
        for names in [
            LockNames::new(&REENTRANT, "", name),
            LockNames::new(&FAIR, "app:", name),
            LockNames::new(&FENCED, "", name),
            LockNames::new(&READ, "", name),
            LockNames::new(&WRITE, "app:", name),
        ] {
            assert_eq!(names.split_name(), None, "{name}");
        }
    }
    for name in ["a{b", "{}x", "}{", "a}b"] {
        for kind in [&REENTRANT, &READ] {
            let names = LockNames::new(kind, "", name);
            assert!(names.split_name().is_some(), "{name}");
        }
    }
}

#[test]
fn synchronizer_names_follow_redisson() {
    let names = SyncNames::new(SyncKind::Semaphore, "", "db:pool");
    assert_eq!(&*names.key, "db:pool");
    assert_eq!(&*names.channel, "redisson_sc:{db:pool}");
    assert!(names.timeouts.is_none());
    let names = SyncNames::new(SyncKind::ExpirableSemaphore, "app:", "gpu");
    assert_eq!(&*names.key, "app:gpu");
    assert_eq!(&*names.channel, "redisson_sc:{app:gpu}");
    assert_eq!(names.timeouts.as_deref(), Some("{app:gpu}:timeout"));
    let names = SyncNames::new(SyncKind::ExpirableSemaphore, "", "{g}pu");
    assert_eq!(&*names.channel, "redisson_sc:{g}pu");
    assert_eq!(names.timeouts.as_deref(), Some("{g}pu:timeout"));
    let names = SyncNames::new(SyncKind::Latch, "", "batch:42");
    assert_eq!(
        &*names.channel,
        "redisson_countdownlatch__channel__{batch:42}"
    );
}

#[test]
fn request_latches_are_a_cluster_or_sentinel_clients_and_share_the_channel_tag() {
    let latch = |kind, name| {
        SyncNames::new(kind, "", name)
            .on_cluster(ChannelKind::Sharded)
            .request_latch(0xab12)
            .expect("a cluster client's count changes carry latches")
    };
    assert_eq!(
        SyncNames::new(SyncKind::Semaphore, "", "db:pool").request_latch(1),
        None
    );
    assert_eq!(
        &*latch(SyncKind::Semaphore, "db:pool"),
        "redisson_unlock_latch:{db:pool}:0000000000000000000000000000ab12"
    );
    // A Sentinel client's latches are named as a cluster client's.
    for kind in SYNC_KINDS {
        assert_eq!(
            SyncNames::new(kind, "", "db:pool")
                .with_request_latches()
                .request_latch(0xab12),
            Some(latch(kind, "db:pool"))
        );
    }
    assert!(
        latch(SyncKind::ExpirableSemaphore, "{g}pu").starts_with("redisson_unlock_latch:{g}pu:")
    );
    // A latch's names wrap the key in braces whatever it holds, as its channel does.
    assert!(latch(SyncKind::Latch, "a{b").starts_with("redisson_unlock_latch:{a{b}:"));
    for kind in SYNC_KINDS {
        // Wherever the channel is in the key's slot (else the name is refused on a
        // cluster), so is the request latch.
        for name in ["batch:42", "a{b", "{g}pu", "a}b", "}{", "{}x", "x{y}z{"] {
            let slot = |name: &str| key_slot(name.as_bytes());
            let channel = SyncNames::new(kind, "", name).channel;
            if slot(&channel) == slot(name) {
                assert_eq!(slot(&latch(kind, name)), slot(name), "{kind:?} {name}");
            }
        }
    }
}

#[test]
fn synchronizer_names_share_the_key_slot_unless_braces_split_them() {
    for kind in SYNC_KINDS {
        let names = SyncNames::new(kind, "", "batch:42").on_cluster(ChannelKind::Sharded);
        assert_eq!(names.split(), None, "{kind:?}");
        assert_eq!(names.publish_command(), "spublish");
        let names = SyncNames::new(kind, "", "a{b").on_cluster(ChannelKind::Classic);
        // A latch's channel wraps the whole name in braces, whose slot is the name's.
        assert_eq!(names.split().is_some(), kind != SyncKind::Latch, "{kind:?}");
    }
    // Redisson adds braces around a latch's name whatever it holds, so a name with a
    // tag of its own puts the channel in another slot.
    let names = SyncNames::new(SyncKind::Latch, "", "{user}:batch");
    assert!(names.on_cluster(ChannelKind::Classic).split().is_some());
    let names = SyncNames::new(SyncKind::Semaphore, "", "{user}:pool");
    assert!(names.on_cluster(ChannelKind::Classic).split().is_none());
}

#[test]
fn hash_tagged_names_keep_their_tag() {
    let names = LockNames::new(&REENTRANT, "app:", "{user42}:cart");
    assert_eq!(&*names.key, "app:{user42}:cart");
    assert_eq!(&*names.channel, "redisson_lock__channel:app:{user42}:cart");
}

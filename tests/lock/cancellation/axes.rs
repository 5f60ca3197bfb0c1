//! The axes of the cancellation matrix: the lock kinds, the entry points, the cancel points
//! and the state Redis is in.

use std::time::Duration;

/// Named after the library's types.
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    RLock,
    FairLock,
    FencedLock,
    RedLock,
    MultiLock,
}

impl Kind {
    /// How many masters a lock of the kind spans.
    pub(super) fn masters(self) -> usize {
        match self {
            Kind::RedLock => 3,
            Kind::MultiLock => 2,
            _ => 1,
        }
    }

    /// How many masters answer busy before a group gives a round up, so subscribe.
    pub(super) fn busy_masters(self) -> usize {
        match self {
            // Quorum 2 of 3: a second busy master decides the round.
            Kind::RedLock => 2,
            _ => 1,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// The entry points of an acquire.
pub(super) enum Entry {
    Lock,
    LockWithLease,
    TryLock,
    TryLockFor,
    TryLockWith,
}

/// The entry points a call cancelled in its first script call can have come through.
pub(super) const EVERY_ENTRY: [Entry; 5] = [
    Entry::Lock,
    Entry::LockWithLease,
    Entry::TryLock,
    Entry::TryLockFor,
    Entry::TryLockWith,
];
/// The entry points that wait, so subscribe.
pub(super) const WAITING_ENTRIES: [Entry; 4] = [
    Entry::Lock,
    Entry::LockWithLease,
    Entry::TryLockFor,
    Entry::TryLockWith,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// Where in the call the cancel comes (the module docs' table).
pub(super) enum Point {
    FirstScript,
    SomeMastersTaken,
    Subscribing,
    ScriptAfterSubscribing,
    Waiting,
}

impl Point {
    /// The entry points that can be cancelled at this point.
    pub(super) fn entries(self) -> &'static [Entry] {
        match self {
            Point::FirstScript | Point::SomeMastersTaken => &EVERY_ENTRY,
            _ => &WAITING_ENTRIES,
        }
    }

    /// Whether a rival holds the lock, so that the call goes on to subscribe.
    pub(super) fn rival_holds(self) -> bool {
        matches!(
            self,
            Point::Subscribing | Point::ScriptAfterSubscribing | Point::Waiting
        )
    }

    /// Whether new connections are refused (`maxclients`) to hold the subscription back.
    pub(super) fn refuses_connections(self) -> bool {
        matches!(self, Point::Subscribing | Point::ScriptAfterSubscribing)
    }

    /// Whether a script of the call is in flight at the cancel.
    pub(super) fn script_in_flight(self) -> bool {
        matches!(
            self,
            Point::FirstScript | Point::SomeMastersTaken | Point::ScriptAfterSubscribing
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// The state of the masters from the cancel point until what was in flight timed out.
pub(super) enum Redis {
    Up,
    Frozen,
}

impl Redis {
    /// The waiter's response timeout. Up: longer than any test holds a script. Frozen: short
    /// enough to run out while frozen, and, where a script is in flight from before the
    /// freeze, long enough for the test to freeze Redis and cancel first.
    pub(super) fn response_timeout(self, point: Point) -> Duration {
        match (self, point.script_in_flight()) {
            (Redis::Up, _) => Duration::from_secs(5),
            (Redis::Frozen, true) => Duration::from_millis(1_000),
            (Redis::Frozen, false) => Duration::from_millis(400),
        }
    }

    /// How long the masters stay frozen after the cancel: past the response timeout, so
    /// that what was in flight times out (there is no event to await: it happens inside
    /// the library).
    pub(super) fn frozen_for(self, point: Point) -> Duration {
        self.response_timeout(point) + Duration::from_millis(300)
    }
}

//! The lock kinds as types ([`Reentrant`], [`Fair`](crate::Fair), [`Fenced`](crate::Fenced),
//! [`Read`](crate::Read), [`Write`](crate::Write)) and the one place that says what each
//! kind changes: its Redis names, how its holds are renewed, and how its waiters wait
//! ([`Turn`]).
//!
//! A kind is chosen by type (`Lock<Fair>`), and each type names its description in the
//! protocol ([`protocol::kinds`](crate::protocol::kinds)): its names, scripts and the shape
//! of their calls. From then on the engine reads that description, never which kind it is.

use std::sync::Arc;

use crate::client_core::Core;
use crate::holds::Renewal;
use crate::locks::fair::QueuePlace;
use crate::protocol::kinds::reentrant::REENTRANT;
use crate::protocol::kinds::Kind;
use crate::protocol::names::LockNames;

/// The kind of a [`Lock`](crate::Lock): [`Reentrant`], [`Fair`](crate::Fair),
/// [`Fenced`](crate::Fenced), or a read-write lock's [`Read`](crate::Read) or
/// [`Write`](crate::Write). Sealed: the kinds are this crate's, each with its own scripts.
pub trait LockKind: sealed::Sealed + Send + Sync + 'static {}

pub(crate) mod sealed {
    /// What the engine needs of a kind; public in name only, so that no other crate can
    /// add a kind.
    pub trait Sealed {
        /// The type name shown by `Debug`.
        const TYPE_NAME: &'static str;
        /// What the kind is in Redis.
        const KIND: &'static crate::protocol::kinds::Kind;
    }
}

/// How the watchdog renews `owner`'s hold on the lock of `names`.
pub(crate) fn renewal(names: &LockNames, owner: &str) -> Renewal {
    match names.kind.side {
        None => Renewal::Key,
        Some(_) => Renewal::ReadWrite {
            read_timeouts: names.read_timeouts(owner),
        },
    }
}

/// The kind of an [`RLock`](crate::RLock): reentrant, a release wakes any one waiter
/// (Redisson's `RLock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reentrant;

impl LockKind for Reentrant {}

impl sealed::Sealed for Reentrant {
    const TYPE_NAME: &'static str = "RLock";
    const KIND: &'static Kind = &REENTRANT;
}

/// What a waiting call keeps from the moment it listens for unlocks until it ends, by the
/// kind of its lock: nothing (all waiters hear the lock's one channel, and the first
/// there wins), or a fair lock's place in the queue.
pub(crate) enum Turn {
    /// Waiters race; nothing to keep.
    Race,
    /// A place in a fair lock's queue, joined by the attempts that follow.
    Queued(QueuePlace),
}

impl Turn {
    /// Starts waiting for the lock of `names` as `owner`, once its unlocks are heard.
    pub(crate) fn start(core: &Arc<Core>, names: &Arc<LockNames>, owner: &Arc<str>) -> Turn {
        if names.kind.queued {
            Turn::Queued(QueuePlace::claim(core, names, owner))
        } else {
            Turn::Race
        }
    }

    /// Whether attempts made during this turn join the lock's queue (or refresh the place).
    pub(crate) fn joins_queue(&self) -> bool {
        matches!(self, Turn::Queued(_))
    }

    /// The wait ended with the lock (`Some(true)`), gave up (`Some(false)`), or failed
    /// (`None`: Redis is failing, and a leave now would fail too).
    pub(crate) async fn end(self, acquired: Option<bool>) {
        let Turn::Queued(place) = self else {
            return;
        };
        match acquired {
            Some(true) => place.taken(),
            // Left before returning, so that the caller sees the queue without it and the
            // waiter behind it is already told.
            Some(false) => place.leave().await,
            None => drop(place),
        }
    }

    /// An attempt that joined the queue of `names` was abandoned by its caller after it
    /// may have run: leave the place it may have taken, in the background.
    pub(crate) fn abandoned(core: &Arc<Core>, names: &Arc<LockNames>, owner: &Arc<str>) {
        if names.kind.queued {
            crate::locks::fair::leave_in_background(core.clone(), names.clone(), owner.clone());
        }
    }
}

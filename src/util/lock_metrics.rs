//! The metrics of one lock handle, with its `kind` and `class` labels resolved once, when
//! the handle is made ([`Classes::of`]): a lock call then records through ready handles,
//! building no label set and hashing nothing. Without the `metrics` feature, everything
//! here is empty.
//!
//! The lock kinds' labels are the protocol's table of kinds, above this layer: the client
//! passes them in ([`Classes::new`]), so that a new kind has its series without a line here.
//!
//! A lock's *class* is a bounded label that groups lock names into families (`orders`,
//! `invoices`), so that a dashboard can tell which family is contended without a lock name
//! ever reaching a label: one class, `default`, unless the client is given a rule
//! ([`ClientBuilder::lock_class_by_prefix`](crate::ClientBuilder::lock_class_by_prefix),
//! [`lock_class_with`](crate::ClientBuilder::lock_class_with)); at most
//! [`max_lock_classes`](crate::ClientBuilder::max_lock_classes) classes per client, and the
//! names past them fold into `other`, counted by `rlock_lock_classes_folded_total`.

// Without the feature, the rule is kept (the builder takes it either way) but never asked,
// and the recording calls' arguments are unused.
#![cfg_attr(not(feature = "metrics"), allow(dead_code, unused_variables))]

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

#[cfg(feature = "metrics")]
use super::metrics::{AcquireOutcome, LOST_REASONS, OTHER_ACQUIRE_KINDS, RELEASE_OUTCOMES};

/// The class of every lock when the client has no rule.
pub(crate) const DEFAULT_CLASS: &str = "default";
/// The class of the names past the cap.
pub(crate) const OTHER_CLASS: &str = "other";

/// A user's rule: the class of a lock's name.
pub(crate) type ClassOf = dyn Fn(&str) -> Cow<'static, str> + Send + Sync;

/// How a lock's name becomes its class.
#[derive(Clone, Default)]
pub(crate) enum ClassRule {
    /// One class, [`DEFAULT_CLASS`].
    #[default]
    One,
    /// The name up to its first `separator` (the whole name without one).
    Prefix(char),
    /// The user's function.
    With(Arc<ClassOf>),
}

impl fmt::Debug for ClassRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClassRule::One => f.write_str("One"),
            ClassRule::Prefix(separator) => write!(f, "Prefix({separator:?})"),
            ClassRule::With(_) => f.write_str("With(..)"),
        }
    }
}

impl ClassRule {
    /// The class `name` belongs to, by this rule.
    fn class<'n>(&self, name: &'n str) -> Cow<'n, str> {
        match self {
            ClassRule::One => Cow::Borrowed(DEFAULT_CLASS),
            ClassRule::Prefix(separator) => {
                Cow::Borrowed(name.split_once(*separator).map_or(name, |(first, _)| first))
            }
            ClassRule::With(rule) => rule(name),
        }
    }
}

/// One client's classes: its rule, its cap, and the handles of each class and kind made
/// so far.
#[derive(Debug)]
pub(crate) struct Classes {
    rule: ClassRule,
    #[cfg(feature = "metrics")]
    cap: usize,
    #[cfg(feature = "metrics")]
    lock_kinds: &'static [&'static str],
    #[cfg(feature = "metrics")]
    admitted: dashmap::DashMap<Arc<str>, ClassHandles>,
}

impl Classes {
    /// `lock_kinds`: the `kind` label of every lock kind (a lock's own acquires, releases
    /// and holds), told apart from those of groups and synchronizers, whose releases count
    /// under their locks' kinds.
    pub(crate) fn new(rule: ClassRule, cap: usize, lock_kinds: &'static [&'static str]) -> Self {
        let classes = Classes {
            rule,
            #[cfg(feature = "metrics")]
            cap,
            #[cfg(feature = "metrics")]
            lock_kinds,
            #[cfg(feature = "metrics")]
            admitted: dashmap::DashMap::new(),
        };
        // The series of the default class exist from the start, as the others do once a
        // handle of theirs is made: a first loss must show as an increase.
        #[cfg(feature = "metrics")]
        if matches!(classes.rule, ClassRule::One) {
            classes.admit(DEFAULT_CLASS);
        }
        classes
    }

    /// The metrics of a handle of `kind` (a lock kind's label, or one of
    /// `OTHER_ACQUIRE_KINDS`) named `name`, or set to the class `forced`.
    pub(crate) fn of(&self, kind: &'static str, name: &str, forced: Option<&str>) -> LockMetrics {
        #[cfg(feature = "metrics")]
        {
            let class = match forced {
                Some(class) => Cow::Borrowed(class),
                None => self.rule.class(name),
            };
            let handles = match self.admitted.get(&*class) {
                Some(handles) => handles.clone(),
                None => self.admit(&class),
            };
            LockMetrics(Some(handles.of(kind)))
        }
        #[cfg(not(feature = "metrics"))]
        LockMetrics(())
    }

    /// The handles of `class`, made (at zero) if there is room for it; those of
    /// [`OTHER_CLASS`] otherwise, and the fold counted.
    #[cfg(feature = "metrics")]
    fn admit(&self, class: &str) -> ClassHandles {
        let class = if self.admitted.len() >= self.cap && class != OTHER_CLASS {
            metrics::counter!(super::metrics::CLASSES_FOLDED).increment(1);
            // `other` has a place beyond the cap.
            OTHER_CLASS
        } else {
            class
        };
        let class: Arc<str> = class.into();
        let made = self.admitted.entry(class.clone());
        made.or_insert_with(|| ClassHandles::new(class, self.lock_kinds))
            .clone()
    }
}

/// The metrics of one lock handle (see the module docs); cheap to clone. The default
/// records nothing, until a client's [`Classes`] gives a handle its own.
#[derive(Clone, Debug, Default)]
pub(crate) struct LockMetrics(
    #[cfg(feature = "metrics")] Option<Arc<Handles>>,
    #[cfg(not(feature = "metrics"))] (),
);

/// Counts one waiting call in `rlock_waiting_tasks` while it lives.
#[derive(Debug)]
pub(crate) struct Waiting(LockMetrics);

impl Waiting {
    pub(crate) fn start(metrics: &LockMetrics) -> Self {
        metrics.waiting(1.0);
        Waiting(metrics.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting(-1.0);
    }
}

#[cfg(feature = "metrics")]
use metrics::{Counter, Gauge, Histogram};

/// The handles of one kind and class.
#[cfg(feature = "metrics")]
#[derive(Debug)]
pub(crate) struct Handles {
    acquires: [Counter; 4],
    waits: [Histogram; 4],
    hold: Histogram,
    releases: [Counter; 4],
    lost: [Counter; 5],
    held: Gauge,
    waiting: Gauge,
}

/// The handles of one class, by kind (the lock kinds', then `OTHER_ACQUIRE_KINDS`).
#[cfg(feature = "metrics")]
#[derive(Clone, Debug)]
struct ClassHandles(Arc<[(&'static str, Arc<Handles>)]>);

#[cfg(feature = "metrics")]
impl ClassHandles {
    /// A class's series, every counter and gauge of every kind at zero: a first loss, a
    /// first failed acquire of a class must show as an increase.
    fn new(class: Arc<str>, lock_kinds: &'static [&'static str]) -> Self {
        let kinds = lock_kinds.iter().chain(&OTHER_ACQUIRE_KINDS).enumerate();
        ClassHandles(
            kinds
                .map(|(index, &kind)| {
                    let lock_kind = index < lock_kinds.len();
                    (kind, Arc::new(Handles::new(kind, lock_kind, &class)))
                })
                .collect(),
        )
    }

    fn of(&self, kind: &'static str) -> Arc<Handles> {
        let (_, handles) = (self.0.iter().find(|(k, _)| *k == kind))
            .expect("every kind label is a lock kind's or in util::metrics");
        handles.clone()
    }
}

#[cfg(feature = "metrics")]
impl Handles {
    /// `lock_kind`: `kind` is a lock's, whose releases count under it.
    fn new(kind: &'static str, lock_kind: bool, class: &Arc<str>) -> Self {
        use super::metrics::{ACQUIRES, ACQUIRE_WAIT, HELD, HOLD, LOST, RELEASES, WAITING};
        use metrics::{counter, gauge, histogram};
        let class = || metrics::SharedString::from(class.clone());
        let at_zero = |counter: Counter| {
            counter.increment(0);
            counter
        };
        let acquires = AcquireOutcome::LABELS.map(|outcome| {
            at_zero(counter!(ACQUIRES, "kind" => kind, "outcome" => outcome, "class" => class()))
        });
        let waits = AcquireOutcome::LABELS.map(|outcome| {
            histogram!(ACQUIRE_WAIT, "kind" => kind, "outcome" => outcome, "class" => class())
        });
        let releases = RELEASE_OUTCOMES.map(|outcome| {
            let counter =
                counter!(RELEASES, "kind" => kind, "outcome" => outcome, "class" => class());
            // Groups' and synchronizers' releases count under their locks' kinds.
            if lock_kind {
                counter.increment(0);
            }
            counter
        });
        let lost = LOST_REASONS
            .map(|reason| at_zero(counter!(LOST, "reason" => reason, "class" => class())));
        let held = gauge!(HELD, "class" => class());
        let waiting = gauge!(WAITING, "class" => class());
        held.increment(0.0);
        waiting.increment(0.0);
        Handles {
            acquires,
            waits,
            hold: histogram!(HOLD, "kind" => kind, "class" => class()),
            releases,
            lost,
            held,
            waiting,
        }
    }
}

impl LockMetrics {
    /// An acquire call started at `started` (see [`super::metrics::start`]) ended.
    pub(crate) fn acquire_ended(
        &self,
        outcome: super::metrics::AcquireOutcome,
        started: Option<std::time::Instant>,
    ) {
        #[cfg(feature = "metrics")]
        if let Some(handles) = &self.0 {
            handles.acquires[outcome as usize].increment(1);
            if let Some(started) = started {
                handles.waits[outcome as usize].record(started.elapsed().as_secs_f64());
            }
        }
    }

    /// A release ended with `outcome` (one of `RELEASE_OUTCOMES`).
    pub(crate) fn released(&self, outcome: &'static str) {
        #[cfg(feature = "metrics")]
        if let Some(handles) = &self.0 {
            if let Some(i) = RELEASE_OUTCOMES.iter().position(|o| *o == outcome) {
                handles.releases[i].increment(1);
            }
        }
    }

    /// An owner's hold ended after `held()` (only asked with the feature).
    pub(crate) fn hold_ended(&self, held: impl FnOnce() -> std::time::Duration) {
        #[cfg(feature = "metrics")]
        if let Some(handles) = &self.0 {
            handles.hold.record(held().as_secs_f64());
        }
    }

    /// A hold was lost for `reason` (one of `LOST_REASONS`).
    pub(crate) fn lost(&self, reason: &'static str) {
        #[cfg(feature = "metrics")]
        if let Some(handles) = &self.0 {
            if let Some(i) = LOST_REASONS.iter().position(|r| *r == reason) {
                handles.lost[i].increment(1);
            }
        }
    }

    /// The process holds one lock more (`1.0`) or fewer (`-1.0`).
    pub(crate) fn held(&self, change: f64) {
        #[cfg(feature = "metrics")]
        if let Some(handles) = &self.0 {
            handles.held.increment(change);
        }
    }

    /// One call more (`1.0`) or fewer (`-1.0`) waits.
    pub(crate) fn waiting(&self, change: f64) {
        #[cfg(feature = "metrics")]
        if let Some(handles) = &self.0 {
            handles.waiting.increment(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_gives_a_names_class() {
        assert_eq!(ClassRule::One.class("orders:42"), DEFAULT_CLASS);
        assert_eq!(ClassRule::Prefix(':').class("orders:42:x"), "orders");
        assert_eq!(ClassRule::Prefix(':').class("plain"), "plain");
        let by_length = ClassRule::With(Arc::new(|name: &str| Cow::Owned(name.len().to_string())));
        assert_eq!(by_length.class("abc"), "3");
    }
}

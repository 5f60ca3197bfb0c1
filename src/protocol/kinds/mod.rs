//! The lock kinds as the protocol sees them: one [`Kind`] value per kind, which says what
//! every call on a lock needs of its kind (the keys it keeps beside the hash, its unlock
//! channel, its owner fields, the shape of each of its scripts' calls, the commands those
//! run). The engine reads these values and never asks which kind it holds.
//!
//! A new kind is three things: its scripts in `lua/`; its [`Kind`], in a file here, named
//! in the `kinds!` table below; and its entry in the table of `locks::kind`, which makes
//! its public types and its `Client` method.
//! Everything that goes over every kind ([`ALL`], [`COUNT`], [`LABELS`], the scripts
//! loaded at connect, the command checks, the metrics' series) follows from the table.

use std::sync::LazyLock;

use crate::protocol::conn::{EvalSha, LuaScript, NUMBER_BYTES};
use crate::protocol::kinds::fair::PlaceTerms;
use crate::protocol::layout::{self, Derived};
use crate::protocol::names::LockNames;

pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod read_write;
pub(crate) mod reentrant;

/// The table of kinds: makes [`ALL`], in the order of the entries, [`COUNT`] and
/// [`LABELS`].
macro_rules! kinds {
    ($($kind:path,)*) => {
        /// How many kinds there are.
        pub(crate) const COUNT: usize = [$(stringify!($kind)),*].len();

        /// Every kind, in the order their command checks are kept (see
        /// `transport::permissions`).
        pub(crate) static ALL: [&Kind; COUNT] = [$(&$kind),*];

        /// Every kind's label, in [`ALL`]'s order: the metrics, below this layer, make
        /// each kind's series from these.
        pub(crate) static LABELS: [&str; COUNT] = [$($kind.label),*];
    };
}

kinds! {
    reentrant::REENTRANT,
    fair::FAIR,
    fenced::FENCED,
    read_write::READ,
    read_write::WRITE,
}

/// What one kind of lock is, in Redis.
pub struct Kind {
    /// The kind as a metric label and in spans.
    pub(crate) label: &'static str,
    /// Where its unlocks are announced.
    pub(crate) channel: Derived,
    /// The keys it keeps beside the hash, in the order its scripts take them.
    pub(crate) kept: &'static [Kept],
    /// Its waiters queue (each then hears on a channel of its own, and keeps its place by
    /// the heartbeat); otherwise they race on the lock's channel.
    pub(crate) queued: bool,
    /// A read-write lock's side: its holds renew with the read-write script, and a write
    /// lock's owner fields end in `:write`.
    pub(crate) side: Option<Side>,
    /// Every acquire draws a fencing token.
    pub(crate) fenced: bool,
    /// Its scripts. Calls of `acquire.lua` and `unlock.lua`, which take many locks, may
    /// share one call with other locks' (see `scripts::acquire` and `scripts::unlock`).
    pub(crate) acquire: &'static Call,
    pub(crate) unlock: &'static Call,
    pub(crate) force_unlock: &'static Call,
    pub(crate) inspect: &'static Call,
    /// Its other scripts, called by its own calls (a fair queue's, a fenced write's).
    pub(crate) more_scripts: &'static [&'static LazyLock<LuaScript>],
    /// The commands its scripts run beyond those of every kind, for the ACL check, with
    /// [`Kind::word`]'s placeholders for its names.
    pub(crate) commands: &'static [&'static [&'static str]],
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label)
    }
}

/// A key a kind keeps beside the lock hash.
#[derive(Debug)]
pub(crate) struct Kept {
    /// Its name, from the lock key.
    pub(crate) name: fn(&str) -> String,
    /// The key an ACL check asks about, from the name: the name itself, or for a name that
    /// only prefixes the keys written (a read hold's timeout keys), a sample of those.
    pub(crate) checked_as: fn(&str) -> String,
    /// A command that writes it, `$` standing for the key.
    pub(crate) written_by: &'static [&'static str],
    /// The ACL rule that grants it, as a user would write it.
    pub(crate) grant: &'static str,
}

impl Kept {
    /// A key checked as itself.
    pub(crate) const fn itself(
        name: fn(&str) -> String,
        written_by: &'static [&'static str],
        grant: &'static str,
    ) -> Self {
        Kept {
            name,
            checked_as: str::to_string,
            written_by,
            grant,
        }
    }
}

/// The side of a read-write lock a handle takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The read lock: shared.
    Read,
    /// The write lock: exclusive.
    Write,
}

/// One script of a kind, and the shape of its call: its keys and its arguments, in order.
pub(crate) struct Call {
    pub(crate) script: &'static LazyLock<LuaScript>,
    pub(crate) keys: &'static [Arg],
    pub(crate) args: &'static [Arg],
}

/// One key or argument of a call, by what it is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg {
    /// The lock hash.
    Key,
    /// The kind's kept key of this index.
    Kept(usize),
    /// The prefix of the owner's read holds' timeout keys, `{<key>}:<owner>:rwlock_timeout`.
    ReadTimeouts,
    /// The lock's unlock channel.
    Channel,
    /// The command unlock messages are published with: `publish` or `spublish`.
    Publish,
    /// This text.
    Text(&'static str),
    /// The lease in ms.
    Lease,
    /// The owner field.
    Owner,
    /// `1` when an earlier try of the request may have run, else `0`.
    Retry,
    /// The holds a release expects its owner to have before it (see `unlock.lua`).
    Expected,
    /// How long a queued waiter keeps its place without refreshing it, in ms.
    KeepPlace,
    /// `queue` to join the queue when the lock is taken, `try` not to.
    Join,
    /// What a queued waiter's deadline grows by for each waiter ahead of it, in ms.
    Ahead,
}

/// The values of one call's arguments.
#[derive(Debug, Default)]
pub(crate) struct Values<'a> {
    pub(crate) owner: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) retry: bool,
    pub(crate) expected: u32,
    pub(crate) join: bool,
    pub(crate) place: PlaceTerms,
}

impl Call {
    /// The call on the lock of `names`, with room for `more` arguments the caller adds.
    pub(crate) fn build(
        &self,
        names: &LockNames,
        values: &Values<'_>,
        more: usize,
    ) -> EvalSha<'static> {
        let args = self.keys.len() + self.args.len();
        let bytes = args * NUMBER_BYTES + 3 * names.key.len() + 2 * values.owner.len();
        let script: &'static LuaScript = LazyLock::force(self.script);
        let mut call = EvalSha::new(script, self.keys.len(), args + more, bytes);
        for arg in self.keys.iter().chain(self.args) {
            match *arg {
                Arg::Key => call.arg(&*names.key),
                Arg::Kept(index) => call.arg(&*names.kept[index]),
                Arg::ReadTimeouts => {
                    call.arg(layout::read_timeout_prefix(&names.key, values.owner))
                }
                Arg::Channel => call.arg(&*names.channel),
                Arg::Publish => call.arg(names.publish_command()),
                Arg::Text(text) => call.arg(text),
                Arg::Lease => call.arg(values.lease_ms),
                Arg::Owner => call.arg(values.owner),
                Arg::Retry => call.arg(if values.retry { "1" } else { "0" }),
                Arg::Expected => call.arg(values.expected),
                Arg::KeepPlace => call.arg(values.place.keep_ms),
                Arg::Join => call.arg(if values.join { "queue" } else { "try" }),
                Arg::Ahead => call.arg(values.place.per_waiter_ahead_ms),
            };
        }
        call
    }
}

impl Kind {
    /// Every script of every kind, each once, for loading at connect.
    pub(crate) fn scripts() -> Vec<&'static LazyLock<LuaScript>> {
        let mut scripts: Vec<&'static LazyLock<LuaScript>> = Vec::new();
        for kind in ALL {
            let calls = [kind.acquire, kind.unlock, kind.force_unlock, kind.inspect];
            for script in calls
                .map(|call| call.script)
                .iter()
                .chain(kind.more_scripts)
            {
                if !scripts.iter().any(|known| std::ptr::eq(*known, *script)) {
                    scripts.push(script);
                }
            }
        }
        scripts
    }

    /// Where this kind stands in [`ALL`].
    pub(crate) fn index(&'static self) -> usize {
        ALL.iter()
            .position(|kind| std::ptr::eq(*kind, self))
            .expect("every kind is listed in ALL")
    }

    /// A word of one of this kind's [`commands`](Kind::commands) for the lock of `names`:
    /// `$key` is the lock hash, `$channel` its channel, `$0`, `$1`… its kept keys (as an
    /// ACL check asks about them), `$count` the command that counts a channel's
    /// subscribers (`count`); any other word as it is.
    pub(crate) fn word(
        &self,
        word: &'static str,
        names: &LockNames,
        count: &'static str,
    ) -> String {
        match word {
            "$key" => names.key.to_string(),
            "$channel" => names.channel.to_string(),
            "$count" => count.to_string(),
            _ => match word.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                Some(index) => (self.kept[index].checked_as)(&names.kept[index]),
                None => word.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metrics and spans tell the kinds apart by their labels, and the engine finds a kind's
    /// place in [`ALL`] by its address: both must be unique.
    #[test]
    fn every_kind_is_listed_once_under_a_label_of_its_own() {
        for (at, kind) in ALL.iter().enumerate() {
            assert_eq!(kind.index(), at, "{kind:?} is listed twice");
            let same = ALL.iter().filter(|other| other.label == kind.label);
            assert_eq!(same.count(), 1, "two kinds are labelled {}", kind.label);
        }
    }
}

//! What a worker reports: one line of text per event on its stdout, read back by the
//! coordinator. Plain text rather than a serialisation crate, so that a worker's output can
//! be read by eye when a run goes wrong.
//!
//! A line is `TORTURE <at> <worker> <event> key=value...`; `<at>` is on the shared clock
//! (see `clock`). Anything else on stdout (the test harness's own
//! lines) is ignored, and the marker is searched anywhere in a line because the harness
//! may print `test torture_worker ... ` without a line break before the first event.

use std::fmt;

use super::clock::Micros;

/// Marks the lines that carry events.
pub const MARKER: &str = "TORTURE";

/// Which process an event is about: workers count from 1, the coordinator is 0.
pub type WorkerId = u32;

/// The coordinator's id, for its own acquisition at the end of a run.
pub const COORDINATOR: WorkerId = 0;

/// One thing that happened in a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When the worker reported it.
    pub at: Micros,
    /// Who reported it.
    pub worker: WorkerId,
    /// What happened.
    pub kind: EventKind,
}

/// A call into the lock or the resource: when it began and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// When the call was made.
    pub began: Micros,
    /// How long it took to return, on the worker's monotonic clock.
    pub took: Micros,
}

impl Call {
    /// When the call returned.
    pub fn ended(&self) -> Micros {
        self.began + self.took
    }
}

/// How a critical-section write reached the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteVia {
    /// The engine's fenced write, which also appends the write to the resource's log.
    Logged,
    /// The library's `Client::fenced_set`, sharing the same fence.
    Library,
}

/// How an `unlock()` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnlockOutcome {
    /// The lock was released.
    Released,
    /// `Error::LockLost`, with the reason's name.
    LockLost(String),
    /// Any other error, with its text.
    Failed(String),
}

/// The kinds of event, each with what the checker needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// The worker process is running.
    Started {
        /// Its process id.
        pid: u32,
    },
    /// An acquire returned a guard. `acq` numbers the worker's acquisitions from 1.
    Acquired {
        /// The worker's acquisition number.
        acq: u64,
        /// The guard's fencing token.
        token: u64,
        /// The acquire call.
        call: Call,
        /// The guard's validity deadline, on the shared clock.
        valid_until: Micros,
    },
    /// An acquire waited its whole bound while someone else held the lock.
    AcquireTimedOut {
        /// The acquire call.
        call: Call,
    },
    /// An acquire failed.
    AcquireFailed {
        /// The acquire call.
        call: Call,
        /// The error's text.
        error: String,
    },
    /// A fenced write inside a critical section returned.
    Wrote {
        /// The acquisition it was made under.
        acq: u64,
        /// The token it carried.
        token: u64,
        /// Its number within the section, from 0.
        seq: u32,
        /// Which write path it took.
        via: WriteVia,
        /// Whether it was the stale write a worker makes after it was told it lost the
        /// lock, as a holder paused between its last look at the lock and its write would.
        after_loss: bool,
        /// Whether the resource accepted it.
        accepted: bool,
        /// Whether the guard was still valid (not lost, deadline ahead) when it returned.
        valid_after: bool,
        /// The write call.
        call: Call,
        /// The guard's validity deadline when it returned, on the shared clock.
        valid_until: Micros,
    },
    /// A fenced write failed (the resource could not be reached).
    WriteFailed {
        /// The acquisition it was made under.
        acq: u64,
        /// Its number within the section.
        seq: u32,
        /// Which write path it took.
        via: WriteVia,
        /// Whether it was the stale write after the loss.
        after_loss: bool,
        /// The write call.
        call: Call,
        /// The error's text.
        error: String,
    },
    /// The holder took the lock again inside its section (a nested critical section of
    /// the same task), and kept the inner guard until the section's end.
    Reentered {
        /// The acquisition it re-entered.
        acq: u64,
        /// Whether the re-entry returned a guard (`false`: it timed out or failed).
        acquired: bool,
        /// Whether the outer guard was lost when the re-entry returned: it must be, if the
        /// lock had left Redis before the re-entry (Redis then makes a new field).
        outer_lost: bool,
        /// The re-entry call.
        call: Call,
    },
    /// The guard's `lost()` resolved during the critical section: the section ends here.
    Lost {
        /// The acquisition that was lost.
        acq: u64,
        /// The reason's name (`Expired`, `ConnectionLost`...).
        reason: String,
        /// The guard's validity deadline, on the shared clock.
        valid_until: Micros,
    },
    /// The critical section is over and `unlock()` is about to be called: the section ends
    /// here.
    Releasing {
        /// The acquisition being released.
        acq: u64,
        /// The guard's validity deadline, on the shared clock.
        valid_until: Micros,
    },
    /// `unlock()` returned.
    Unlocked {
        /// The acquisition released.
        acq: u64,
        /// How it ended.
        outcome: UnlockOutcome,
        /// The unlock call.
        call: Call,
    },
    /// The worker was asked to stop and finished its last section.
    Stopped,
    /// A permit step (`cluster` mode, between critical sections): a semaphore
    /// `try_acquire_for` of one permit is about to be sent.
    PermitAcquiring,
    /// The permit step's acquire returned the permit.
    PermitTaken {
        /// The acquire call.
        call: Call,
    },
    /// The permit step's acquire waited its whole bound.
    PermitTimedOut {
        /// The acquire call.
        call: Call,
    },
    /// The permit step's acquire failed: the permit may or may not have been taken.
    PermitAcquireFailed {
        /// The acquire call.
        call: Call,
        /// The error's text.
        error: String,
    },
    /// The permit taken is about to be given back (`SemaphoreGuard::release`).
    PermitReleasing,
    /// The release returned: `None` when it gave the permit back, else the error's text
    /// (the permit may or may not have been given back).
    PermitReleased {
        /// The release call.
        call: Call,
        /// The error, if any.
        error: Option<String>,
    },
}

impl EventKind {
    /// The acquisition this event belongs to, if any.
    pub fn acquisition(&self) -> Option<u64> {
        match self {
            EventKind::Acquired { acq, .. }
            | EventKind::Reentered { acq, .. }
            | EventKind::Wrote { acq, .. }
            | EventKind::WriteFailed { acq, .. }
            | EventKind::Lost { acq, .. }
            | EventKind::Releasing { acq, .. }
            | EventKind::Unlocked { acq, .. } => Some(*acq),
            _ => None,
        }
    }
}

/// Error text on one line without spaces, so that it stays one `key=value` field.
pub fn one_word(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join("_")
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "began={} took={}", self.began, self.took)
    }
}

impl fmt::Display for WriteVia {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WriteVia::Logged => "logged",
            WriteVia::Library => "library",
        })
    }
}

impl fmt::Display for UnlockOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnlockOutcome::Released => f.write_str("released"),
            UnlockOutcome::LockLost(reason) => write!(f, "lock_lost:{reason}"),
            UnlockOutcome::Failed(error) => write!(f, "failed:{}", one_word(error)),
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{MARKER} {} {} ", self.at, self.worker)?;
        match &self.kind {
            EventKind::Started { pid } => write!(f, "started pid={pid}"),
            EventKind::Acquired {
                acq,
                token,
                call,
                valid_until,
            } => write!(
                f,
                "acquired acq={acq} token={token} {call} valid_until={valid_until}"
            ),
            EventKind::Reentered {
                acq,
                acquired,
                outer_lost,
                call,
            } => write!(
                f,
                "reentered acq={acq} acquired={} outer_lost={} {call}",
                u8::from(*acquired),
                u8::from(*outer_lost)
            ),
            EventKind::AcquireTimedOut { call } => write!(f, "acquire_timed_out {call}"),
            EventKind::AcquireFailed { call, error } => {
                write!(f, "acquire_failed {call} error={}", one_word(error))
            }
            EventKind::Wrote {
                acq,
                token,
                seq,
                via,
                after_loss,
                accepted,
                valid_after,
                call,
                valid_until,
            } => write!(
                f,
                "wrote acq={acq} token={token} seq={seq} via={via} after_loss={} accepted={} \
                 valid_after={} {call} valid_until={valid_until}",
                u8::from(*after_loss),
                u8::from(*accepted),
                u8::from(*valid_after)
            ),
            EventKind::WriteFailed {
                acq,
                seq,
                via,
                after_loss,
                call,
                error,
            } => write!(
                f,
                "write_failed acq={acq} seq={seq} via={via} after_loss={} {call} error={}",
                u8::from(*after_loss),
                one_word(error)
            ),
            EventKind::Lost {
                acq,
                reason,
                valid_until,
            } => write!(
                f,
                "lost acq={acq} reason={reason} valid_until={valid_until}"
            ),
            EventKind::Releasing { acq, valid_until } => {
                write!(f, "releasing acq={acq} valid_until={valid_until}")
            }
            EventKind::Unlocked { acq, outcome, call } => {
                write!(f, "unlocked acq={acq} outcome={outcome} {call}")
            }
            EventKind::Stopped => f.write_str("stopped"),
            EventKind::PermitAcquiring => f.write_str("permit_acquiring"),
            EventKind::PermitTaken { call } => write!(f, "permit_taken {call}"),
            EventKind::PermitTimedOut { call } => write!(f, "permit_timed_out {call}"),
            EventKind::PermitAcquireFailed { call, error } => {
                write!(f, "permit_acquire_failed {call} error={}", one_word(error))
            }
            EventKind::PermitReleasing => f.write_str("permit_releasing"),
            EventKind::PermitReleased { call, error } => match error {
                None => write!(f, "permit_released {call}"),
                Some(error) => write!(f, "permit_released {call} error={}", one_word(error)),
            },
        }
    }
}

/// The `key=value` fields of one line.
struct Fields<'a>(Vec<(&'a str, &'a str)>);

impl<'a> Fields<'a> {
    fn text(&self, key: &str) -> Option<&'a str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    fn number<T: std::str::FromStr>(&self, key: &str) -> Option<T> {
        self.text(key)?.parse().ok()
    }

    fn flag(&self, key: &str) -> Option<bool> {
        match self.text(key)? {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        }
    }

    fn call(&self) -> Option<Call> {
        Some(Call {
            began: self.number("began")?,
            took: self.number("took")?,
        })
    }

    fn via(&self) -> Option<WriteVia> {
        match self.text("via")? {
            "logged" => Some(WriteVia::Logged),
            "library" => Some(WriteVia::Library),
            _ => None,
        }
    }

    fn outcome(&self) -> Option<UnlockOutcome> {
        let text = self.text("outcome")?;
        if text == "released" {
            return Some(UnlockOutcome::Released);
        }
        if let Some(reason) = text.strip_prefix("lock_lost:") {
            return Some(UnlockOutcome::LockLost(reason.to_string()));
        }
        text.strip_prefix("failed:")
            .map(|error| UnlockOutcome::Failed(error.to_string()))
    }
}

/// Reads the event on `line`, if it carries one. A line with the marker that does not
/// parse is an error, so that a format mismatch cannot silently hide events.
pub fn parse(line: &str) -> Result<Option<Event>, String> {
    let Some(start) = line.find(&format!("{MARKER} ")) else {
        return Ok(None);
    };
    parse_event(&line[start..])
        .map(Some)
        .ok_or_else(|| format!("unreadable event line: {line}"))
}

fn parse_event(text: &str) -> Option<Event> {
    let mut words = text.split_whitespace();
    let _marker = words.next()?;
    let at = words.next()?.parse().ok()?;
    let worker = words.next()?.parse().ok()?;
    let name = words.next()?;
    let fields = Fields(words.filter_map(|w| w.split_once('=')).collect());
    let kind = match name {
        "started" => EventKind::Started {
            pid: fields.number("pid")?,
        },
        "acquired" => EventKind::Acquired {
            acq: fields.number("acq")?,
            token: fields.number("token")?,
            call: fields.call()?,
            valid_until: fields.number("valid_until")?,
        },
        "reentered" => EventKind::Reentered {
            acq: fields.number("acq")?,
            acquired: fields.flag("acquired")?,
            outer_lost: fields.flag("outer_lost")?,
            call: fields.call()?,
        },
        "acquire_timed_out" => EventKind::AcquireTimedOut {
            call: fields.call()?,
        },
        "acquire_failed" => EventKind::AcquireFailed {
            call: fields.call()?,
            error: fields.text("error")?.to_string(),
        },
        "wrote" => EventKind::Wrote {
            acq: fields.number("acq")?,
            token: fields.number("token")?,
            seq: fields.number("seq")?,
            via: fields.via()?,
            after_loss: fields.flag("after_loss")?,
            accepted: fields.flag("accepted")?,
            valid_after: fields.flag("valid_after")?,
            call: fields.call()?,
            valid_until: fields.number("valid_until")?,
        },
        "write_failed" => EventKind::WriteFailed {
            acq: fields.number("acq")?,
            seq: fields.number("seq")?,
            via: fields.via()?,
            after_loss: fields.flag("after_loss")?,
            call: fields.call()?,
            error: fields.text("error")?.to_string(),
        },
        "lost" => EventKind::Lost {
            acq: fields.number("acq")?,
            reason: fields.text("reason")?.to_string(),
            valid_until: fields.number("valid_until")?,
        },
        "releasing" => EventKind::Releasing {
            acq: fields.number("acq")?,
            valid_until: fields.number("valid_until")?,
        },
        "unlocked" => EventKind::Unlocked {
            acq: fields.number("acq")?,
            outcome: fields.outcome()?,
            call: fields.call()?,
        },
        "stopped" => EventKind::Stopped,
        "permit_acquiring" => EventKind::PermitAcquiring,
        "permit_taken" => EventKind::PermitTaken {
            call: fields.call()?,
        },
        "permit_timed_out" => EventKind::PermitTimedOut {
            call: fields.call()?,
        },
        "permit_acquire_failed" => EventKind::PermitAcquireFailed {
            call: fields.call()?,
            error: fields.text("error")?.to_string(),
        },
        "permit_releasing" => EventKind::PermitReleasing,
        "permit_released" => EventKind::PermitReleased {
            call: fields.call()?,
            error: fields.text("error").map(str::to_string),
        },
        _ => return None,
    };
    Some(Event { at, worker, kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_reads_back_as_written() {
        let call = Call {
            began: 1_700_000_000_000_000,
            took: 1_234,
        };
        let kinds = [
            EventKind::Started { pid: 42 },
            EventKind::Reentered {
                acq: 3,
                acquired: true,
                outer_lost: true,
                call,
            },
            EventKind::Acquired {
                acq: 3,
                token: 99,
                call,
                valid_until: 1_700_000_000_900_000,
            },
            EventKind::AcquireTimedOut { call },
            EventKind::AcquireFailed {
                call,
                error: "redis error: connection refused".into(),
            },
            EventKind::Wrote {
                acq: 3,
                token: 99,
                seq: 1,
                via: WriteVia::Library,
                after_loss: true,
                accepted: false,
                valid_after: false,
                call,
                valid_until: 7,
            },
            EventKind::WriteFailed {
                acq: 3,
                seq: 0,
                via: WriteVia::Logged,
                after_loss: false,
                call,
                error: "timed_out".into(),
            },
            EventKind::Lost {
                acq: 3,
                reason: "ConnectionLost".into(),
                valid_until: 7,
            },
            EventKind::Releasing {
                acq: 3,
                valid_until: 7,
            },
            EventKind::Unlocked {
                acq: 3,
                outcome: UnlockOutcome::LockLost("Expired".into()),
                call,
            },
            EventKind::Unlocked {
                acq: 4,
                outcome: UnlockOutcome::Failed("pool_error".into()),
                call,
            },
            EventKind::Stopped,
            EventKind::PermitAcquiring,
            EventKind::PermitTaken { call },
            EventKind::PermitTimedOut { call },
            EventKind::PermitAcquireFailed {
                call,
                error: "timed_out".into(),
            },
            EventKind::PermitReleasing,
            EventKind::PermitReleased { call, error: None },
            EventKind::PermitReleased {
                call,
                error: Some("broken_pipe".into()),
            },
        ];
        for kind in kinds {
            let event = Event {
                at: 5,
                worker: 2,
                kind,
            };
            // Error texts travel as one word. The harness may glue its own text in front.
            let line = format!("test torture_worker ... {event}");
            let mut expected = event.clone();
            if let EventKind::AcquireFailed { error, .. } = &mut expected.kind {
                *error = one_word(error);
            }
            assert_eq!(parse(&line), Ok(Some(expected)), "{line}");
        }
        assert_eq!(parse("running 1 test"), Ok(None));
        assert!(parse("TORTURE 5 2 acquired acq=x").is_err());
    }
}

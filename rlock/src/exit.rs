//! Exit codes, and the failures that end a command early. Scripts rely on the codes, so
//! they are few and documented (`rlock --help`, the crate docs).

use std::fmt;

/// How a command ended, as the process's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done; nothing wrong found.
    Ok = 0,
    /// 1: problems found (`leaks`, `deadlocks`), no such lock (`show`, `unlock`), or
    /// nothing unlocked (the confirmation was declined, the key is not a lock).
    Found = 1,
    /// 2: a usage error: bad flags, unreadable certificate files, `unlock` without `--yes`
    /// and without a terminal to ask on.
    Usage = 2,
    /// 3: Redis could not be reached: refused connection, timeout, rejected credentials,
    /// TLS failure, no master for the Sentinel name, not a cluster.
    Connect = 3,
    /// 4: Redis answered with an error (a missing ACL permission, a key of an unexpected
    /// type), or the lock kind cannot be force-unlocked by this tool.
    Redis = 4,
    /// 5: `unlock` left the lock alone: by the time the script ran, it was held by others
    /// than the holders shown (or in another mode, or freed).
    Changed = 5,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// A failure that ends the command: the message to print and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// The exit code (never [`Exit::Ok`]).
    pub exit: Exit,
    /// What went wrong, for people; scrubbed of secrets before it is printed.
    pub message: String,
}

impl Failure {
    /// A usage error (exit code 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Failure {
            exit: Exit::Usage,
            message: message.into(),
        }
    }

    /// Redis cannot be reached (exit code 3).
    pub fn connect(message: impl Into<String>) -> Self {
        Failure {
            exit: Exit::Connect,
            message: message.into(),
        }
    }

    /// Redis answered with an error, or the operation is not possible (exit code 4).
    pub fn redis(message: impl Into<String>) -> Self {
        Failure {
            exit: Exit::Redis,
            message: message.into(),
        }
    }

    /// A redis-rs error met after connecting: a connection that dropped or timed out is
    /// still "cannot connect" (3); an error reply is 4.
    pub fn from_redis(context: &str, error: &redis::RedisError) -> Self {
        let message = format!("{context}: {error}");
        if error.is_io_error() || error.is_timeout() || error.is_connection_dropped() {
            Failure::connect(message)
        } else {
            Failure::redis(message)
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What every command returns: how it ended, or the failure that stopped it.
pub type Outcome = Result<Exit, Failure>;

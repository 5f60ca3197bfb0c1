//! Script calls written straight into one command buffer.
//!
//! `redis::ScriptInvocation` copies every key and argument into a vector of its own, then
//! all of them again into the command it sends, and frees them all: for the scripts every
//! lock and unlock runs, that cost more client CPU than the rest of the call, and a
//! renewal round over 100,000 locks made some 300,000 allocations. An [`EvalSha`] appends
//! each argument once, into the command's single buffer, and loads the script itself when
//! Redis has lost it.

use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, Script, ServerErrorKind, ToRedisArgs};

use crate::protocol::conn::Conn;
use crate::protocol::slot::key_slot;

/// A Lua script: its source (a cluster node that lost it is sent the source alone, see
/// [`Conn::load_script`]) and redis-rs' script, which hashes it once.
pub(crate) struct LuaScript {
    source: String,
    script: Script,
}

impl LuaScript {
    pub(crate) fn new(source: String) -> Self {
        let script = Script::new(&source);
        LuaScript { source, script }
    }

    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    pub(crate) fn script(&self) -> &Script {
        &self.script
    }
}

/// One `EVALSHA` of a script, built key by key and argument by argument: every key first,
/// as Redis expects, then the arguments.
pub(crate) struct EvalSha<'s> {
    script: &'s LuaScript,
    cmd: Cmd,
    keys: usize,
}

impl<'s> EvalSha<'s> {
    /// A call of `script` on `keys` keys; `args` and `bytes` size the buffer (arguments
    /// and their total length, keys included), to spare it from growing.
    pub(crate) fn new(script: &'s LuaScript, keys: usize, args: usize, bytes: usize) -> Self {
        let mut cmd = Cmd::with_capacity(3 + args, 64 + bytes);
        cmd.arg("EVALSHA").arg(script.script.get_hash()).arg(keys);
        EvalSha { script, cmd, keys }
    }

    /// Appends a key or an argument.
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// Sends the call; when Redis no longer has the script (a restart, `SCRIPT FLUSH`),
    /// loads it and sends the call once more. On a cluster the script is loaded on the
    /// node of the call's first key: each node has a script cache of its own, emptied when
    /// it restarts or a replica is promoted.
    pub(crate) async fn query<T: FromRedisValue>(&self, conn: &mut Conn) -> RedisResult<T> {
        match self.cmd.query_async(conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                conn.load_script(self.script, self.first_key_slot()).await?;
                self.cmd.query_async(conn).await
            }
            other => other,
        }
    }

    /// The hash slot of the call's first key (after `EVALSHA`, the hash and the key
    /// count), which routes it on a cluster.
    fn first_key_slot(&self) -> Option<u16> {
        if self.keys == 0 {
            return None;
        }
        match self.cmd.args_iter().nth(3)? {
            redis::Arg::Simple(key) => Some(key_slot(key)),
            _ => None,
        }
    }
}

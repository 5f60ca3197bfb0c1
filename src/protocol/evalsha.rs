//! Script calls written straight into one command buffer.
//!
//! `redis::ScriptInvocation` copies every key and argument into a vector of its own, then
//! all of them again into the command it sends, and frees them all: for the scripts every
//! lock and unlock runs, that cost more client CPU than the rest of the call, and a
//! renewal round over 100,000 locks made some 300,000 allocations. An [`EvalSha`] appends
//! each argument once, into the command's single buffer, and loads the script itself when
//! Redis has lost it.

use redis::aio::MultiplexedConnection;
use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, Script, ServerErrorKind, ToRedisArgs};

/// One `EVALSHA` of a script, built key by key and argument by argument: every key first,
/// as Redis expects, then the arguments.
pub(crate) struct EvalSha<'s> {
    script: &'s Script,
    cmd: Cmd,
}

impl<'s> EvalSha<'s> {
    /// A call of `script` on `keys` keys; `args` and `bytes` size the buffer (arguments
    /// and their total length, keys included), to spare it from growing.
    pub(crate) fn new(script: &'s Script, keys: usize, args: usize, bytes: usize) -> Self {
        let mut cmd = Cmd::with_capacity(3 + args, 64 + bytes);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
        EvalSha { script, cmd }
    }

    /// Appends a key or an argument.
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// Sends the call; when Redis no longer has the script (a restart, `SCRIPT FLUSH`),
    /// loads it and sends the call once more.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        conn: &mut MultiplexedConnection,
    ) -> RedisResult<T> {
        match self.cmd.query_async(conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.script.load_async(conn).await?;
                self.cmd.query_async(conn).await
            }
            other => other,
        }
    }
}

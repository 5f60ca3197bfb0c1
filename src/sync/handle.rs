//! [`Handle`]: what every synchronizer handle holds: its client, its name and the names it
//! derives, checked once when it is made and reported by each call.

use std::sync::Arc;

use std::future::Future;

use crate::client_core::Core;
use crate::config::settings::Topology;
use crate::error::Result;
use crate::protocol::conn::Conn;
use crate::protocol::names::{SyncKind, SyncNames};
use crate::protocol::scripts::{self, Change, RequestLatch};
use crate::sync::call::{self, Kind};
use crate::sync::check;

/// A synchronizer's client and names.
#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) core: Arc<Core>,
    pub(crate) name: Arc<str>,
    /// `None` for an invalid name, reported by every call.
    names: Option<Arc<SyncNames>>,
    what: &'static str,
}

impl Handle {
    /// `what` names the kind in errors ("semaphore").
    pub(crate) fn new(core: Arc<Core>, kind: SyncKind, what: &'static str, name: &str) -> Self {
        let names = check::name(what, name).ok().map(|()| {
            let metrics = core.classes.of(kind.label(), name, None);
            let names = SyncNames::new(kind, &core.settings.key_prefix, name).with_metrics(metrics);
            Arc::new(match core.settings.topology {
                Topology::Cluster { .. } => names.on_cluster(core.channel_kind),
                Topology::Sentinel { .. } => names.with_request_latches(),
                Topology::Standalone => names,
            })
        });
        Handle {
            core,
            name: name.into(),
            names,
            what,
        }
    }

    /// The client and names a call uses, once the connected user is known to be allowed
    /// every command of this kind (checked at the kind's first use).
    pub(crate) async fn parts(&self) -> Result<(&Arc<Core>, &Arc<SyncNames>)> {
        let names = self.names()?;
        self.core
            .commands
            .ensure_sync(&self.core.connections, names)
            .await?;
        Ok((&self.core, names))
    }

    /// Runs `script` on the synchronizer's names, sent again as its `kind` allows (see
    /// [`call::run`]): `operation` names the call in errors.
    pub(crate) async fn call<'a, T, F, Fut>(
        &'a self,
        operation: &'static str,
        kind: Kind,
        mut script: F,
    ) -> Result<T>
    where
        F: FnMut(Conn, &'a SyncNames, Option<RequestLatch>) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>> + 'a,
    {
        let (core, names) = self.parts().await?;
        let names: &'a SyncNames = names;
        let outcome = call::run(core, names, operation, kind, |conn, latch| {
            script(conn, names, latch)
        })
        .await;
        outcome.result
    }

    /// Sets the count (permits, or a latch's count), checked already, if none is set: true
    /// when set. Harmless to send twice.
    pub(crate) async fn try_set_count(&self, operation: &'static str, count: u64) -> Result<bool> {
        self.call(operation, Kind::Idempotent, |conn, names, _| {
            scripts::try_set_count(conn, names, count)
        })
        .await
    }

    /// A semaphore's `try_set_permits`: `permits` checked, then set if none are.
    pub(crate) async fn try_set_permits(&self, permits: u64) -> Result<bool> {
        let permits = check::permits_to_set(permits)?;
        self.try_set_count("setting the permits of", permits).await
    }

    /// A semaphore's `add_permits`: `permits` checked, then added as `change` says.
    pub(crate) async fn add_permits(&self, permits: i64, change: Change) -> Result<()> {
        let permits = check::permits_added(permits)?;
        self.call(
            "adding permits to",
            Kind::CountChange,
            |conn, names, latch| scripts::change_permits(conn, names, latch, permits, change),
        )
        .await
        .map(drop)
    }

    /// The count at the name (free permits, or a latch's count); 0 when none is set.
    pub(crate) async fn read_count(&self) -> Result<u64> {
        let count = self
            .call("reading", Kind::Idempotent, |conn, names, _| {
                scripts::read_count(conn, names)
            })
            .await?;
        Ok(count.max(0).unsigned_abs())
    }

    /// Deletes the synchronizer's keys and tells its waiters: true when something was there.
    pub(crate) async fn delete(&self) -> Result<bool> {
        self.call("deleting", Kind::Idempotent, |conn, names, _| {
            scripts::delete(conn, names)
        })
        .await
    }

    /// `f` shows the synchronizer as `kind` with its name: the `Debug` of every handle.
    pub(crate) fn debug(&self, kind: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(kind).field("name", &self.name).finish()
    }

    /// The names every call uses: an invalid name, or one whose derived names a cluster
    /// would put in another slot, is the error.
    pub(crate) fn names(&self) -> Result<&Arc<SyncNames>> {
        match &self.names {
            Some(names) => match names.split() {
                None => Ok(names),
                Some(split) => Err(split.error(&names.key)),
            },
            None => Err(check::name(self.what, &self.name)
                .expect_err("only a rejected name leaves the names unset")),
        }
    }
}

//! [`Handle`]: what every synchronizer handle holds: its client, its name and the names it
//! derives, checked once when it is made and reported by each call.

use std::sync::Arc;

use crate::core::Core;
use crate::error::{Error, Result};
use crate::protocol::names::{SyncKind, SyncNames};
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
            let names = SyncNames::new(kind, &core.settings.key_prefix, name);
            Arc::new(if core.connections.is_cluster() {
                names.on_cluster(core.channel_kind)
            } else {
                names
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

    /// The names every call uses: an invalid name, or one whose derived names a cluster
    /// would put in another slot, is the error.
    fn names(&self) -> Result<&Arc<SyncNames>> {
        match &self.names {
            Some(names) => match names.split() {
                None => Ok(names),
                Some(split) => Err(Error::CrossSlotName {
                    name: names.key.to_string(),
                    slot: split.key_slot,
                    other: split.name.clone(),
                    other_slot: split.slot,
                }),
            },
            None => Err(check::name(self.what, &self.name)
                .expect_err("only a rejected name leaves the names unset")),
        }
    }
}

//! [`Node`]: one lock of a group, checked and ready to be asked.

use std::sync::Arc;

use crate::core::Core;
use crate::locks::attempt::Request;
use crate::protocol::names::LockNames;

/// One lock of a group: its client's core, its names and what to ask of it.
#[derive(Clone)]
pub(crate) struct Node {
    pub(crate) core: Arc<Core>,
    pub(crate) names: Arc<LockNames>,
    pub(crate) request: Request,
}

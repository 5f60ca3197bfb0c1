//! The cluster's slot map, for the transport: one type, [`SlotMap`], read and parsed in the
//! protocol layer, which groups batches by it too.

pub(crate) use crate::protocol::slot::SlotMap;

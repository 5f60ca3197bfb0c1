//! Locks that keep working after a panic elsewhere.
//!
//! The crate's mutexes guard plain bookkeeping (queues of names, slot lists, task handles)
//! that a panicking holder cannot leave half-updated in a way that matters more than
//! stopping every lock call of the process would: a poisoned lock is used as it is.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`], ignoring poison.
pub(crate) fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// [`RwLock::read`], ignoring poison.
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// [`RwLock::write`], ignoring poison.
pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

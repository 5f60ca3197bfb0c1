//! One module per command; each connects, reads through [`inspect`](crate::inspect), and
//! prints through [`render`](crate::render).

pub mod deadlocks;
pub mod leaks;
pub mod list;
pub mod show;
pub mod unlock;
pub mod watch;

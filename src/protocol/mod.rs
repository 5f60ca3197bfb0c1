//! The Redis protocol of a lock, exactly as Redisson lays it out: the names of its keys and
//! channels ([`names`]), the owner field ([`owner`]), the Lua scripts beside their Rust
//! bindings ([`scripts`]), sent as EVALSHA ([`evalsha`]) and coalesced into multi-lock
//! calls under load ([`batch`]).
//!
//! Nothing here knows about connections beyond the one it is handed.

pub(crate) mod batch;
pub(crate) mod evalsha;
pub(crate) mod names;
pub(crate) mod owner;
pub(crate) mod scripts;

//! `rlock`, run as the built binary with stdin closed, against servers the tests start: one
//! test binary for every file here (each a module), so that the suite links one binary
//! rather than one per file. TESTING.md says what each file proves.

mod support;

mod deadlocks;
mod inspect;
mod keyspace;
mod secrets;
mod topologies;
mod unlock;

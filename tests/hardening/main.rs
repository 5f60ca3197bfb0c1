//! Hardening: secrets kept out of `Debug` and errors, TLS, ACL users, hostile input and a
//! full Redis.
//!
//! One test binary for these files (each a module), so that the suite links a few
//! binaries rather than one per file. TESTING.md says what each file proves.

mod acl;
mod hostile_input;
mod out_of_memory;
mod secrets;
mod tls;

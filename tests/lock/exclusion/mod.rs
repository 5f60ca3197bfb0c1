//! Mutual exclusion across clients and tasks, reentrancy per task, and guards that are
//! dropped or moved.
//!
//! `across_clients.rs`: one task inside at a time over many clients, re-entry per task, and
//! guards dropped, moved or re-entered. `reentry_after_loss.rs`: a re-entry after a loss
//! the client did not notice tells the first guard. `futures_of_one_task.rs`: the futures of
//! one task share its hold, unless each has an owner of its own or a non-reentrant handle.

mod across_clients;
mod futures_of_one_task;
mod reentry_after_loss;

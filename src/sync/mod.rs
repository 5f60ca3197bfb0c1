//! Semaphores and latches: [`Semaphore`], [`PermitExpirableSemaphore`] and
//! [`CountDownLatch`], with the layouts, scripts and messages of Redisson's `RSemaphore`,
//! `RPermitExpirableSemaphore` (3.52) and `RCountDownLatch`, so that Java services and Rust
//! services share them.

mod call;
mod check;
mod expirable;
mod handle;
mod latch;
mod permit;
mod semaphore;
mod semaphore_guard;
mod waiting;

pub use expirable::PermitExpirableSemaphore;
pub use latch::CountDownLatch;
pub use permit::ExpirablePermit;
pub use semaphore::Semaphore;
pub use semaphore_guard::SemaphoreGuard;
pub use waiting::RECHECK;

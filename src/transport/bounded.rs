//! [`within`]: a call to Redis bounded in time, failing with the crate's
//! [`Error::Timeout`], which names what ran out of time, rather than tokio's bare `Elapsed`.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};

/// `future`, bounded by `limit`: [`Error::Timeout`] naming what it was `during` when it
/// runs out.
pub(crate) async fn within<T, E: Into<Error>>(
    limit: Duration,
    during: &'static str,
    future: impl Future<Output = std::result::Result<T, E>>,
) -> Result<T> {
    match tokio::time::timeout(limit, future).await {
        Ok(outcome) => outcome.map_err(Into::into),
        Err(_) => Err(Error::Timeout {
            during,
            after: limit,
        }),
    }
}

//! The cluster watcher: reads the slot map (`CLUSTER SLOTS`) when a node task asks (a
//! connection lost, a subscription dropped or redirected by the server, a node that does
//! not answer) and every few seconds otherwise, since a classic subscription is not told
//! when its slot moves; then moves every subscription whose slot lives elsewhere now
//! ([`Hub::reroute`]). Runs while this client's waiters want channels, and ends with the
//! listener.

use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionInfo, Value};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::protocol::slot_map::{cluster_slots, SlotMap};
use crate::transport::bounded::within;
use crate::transport::pubsub::hub::Hub;
use crate::transport::pubsub::topology::host_of;

/// How often the map is read while every subscription is where it belongs: a classic
/// subscription left on a demoted master still hears every `PUBLISH`, but a fair lock's
/// `PUBSUB NUMSUB` on the new master does not count it until it moves.
const RECHECK: Duration = Duration::from_secs(2);

/// How often while some channel waits for its subscription (its node unreachable, its
/// slot unserved, a redirection): a promoted replica takes about two node timeouts.
const UNSETTLED_RECHECK: Duration = Duration::from_millis(250);

/// The least time between two reads, however often they are asked for.
const MIN_GAP: Duration = Duration::from_millis(50);

/// Bound on one `CLUSTER SLOTS` (at most the subscribe timeout): a frozen node must not hold
/// up the read for long before the next node is asked.
const READ_LIMIT: Duration = Duration::from_secs(1);

/// The watcher task of `hub`; `refresh` is its [`Hub::request_refresh`] signal.
pub(super) async fn run(hub: Weak<Hub>, refresh: Arc<Notify>) {
    // A connection to the node the map was last read from, kept between reads.
    let mut control: Option<(MultiplexedConnection, String)> = None;
    let mut last_read: Option<Instant> = None;
    loop {
        let pause = {
            let Some(listener) = hub.upgrade() else {
                return;
            };
            if listener.retire_watcher_if_idle() {
                return;
            }
            if listener.unsettled() {
                UNSETTLED_RECHECK
            } else {
                RECHECK
            }
        };
        // The first read is at once (the first channel has no node yet).
        if let Some(at) = last_read {
            tokio::select! {
                _ = refresh.notified() => {}
                _ = tokio::time::sleep(pause) => {}
            }
            let since = at.elapsed();
            if since < MIN_GAP {
                tokio::time::sleep(MIN_GAP - since).await;
            }
        }
        let Some(listener) = hub.upgrade() else {
            return;
        };
        last_read = Some(Instant::now());
        match read_map(&listener, &mut control).await {
            Ok(map) => {
                let moved = listener.reroute(map);
                if moved > 0 {
                    tracing::debug!(moved, "unlock channels moved to their slots' new masters");
                    // A failover or a migration: locks may have been lost with it.
                    listener.reconnects.tell();
                }
            }
            Err(e) => tracing::debug!(error = %e, "could not read the cluster's slot map"),
        }
    }
}

/// The slot map, from the node read last if it answers, else from the first node that
/// does (those of the last map, then the seeds).
async fn read_map(
    hub: &Hub,
    control: &mut Option<(MultiplexedConnection, String)>,
) -> Result<SlotMap, String> {
    let limit = hub.timing.command_timeout.min(READ_LIMIT);
    if let Some((conn, host)) = control.as_mut() {
        if let Ok(map) = slots(conn, host, limit).await {
            return Ok(map);
        }
        *control = None;
    }
    let mut failure = String::from("no node to read it from");
    for source in hub.topology.map_sources(hub.slots().as_deref()) {
        let host = host_of(&source);
        let read = async {
            let mut conn = connect(hub, source).await?;
            Ok((slots(&mut conn, &host, limit).await?, conn))
        };
        match read.await {
            Ok((map, conn)) => {
                *control = Some((conn, host));
                return Ok(map);
            }
            Err(e) => failure = e,
        }
    }
    Err(failure)
}

async fn connect(hub: &Hub, info: ConnectionInfo) -> Result<MultiplexedConnection, String> {
    let timing = hub.timing;
    let client = redis::Client::open(info).map_err(|e| e.to_string())?;
    let read_limit = timing.command_timeout.min(READ_LIMIT);
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timing.connect_timeout))
        .set_response_timeout(Some(read_limit));
    let limit = timing.connect_timeout + read_limit;
    let connecting = client.get_multiplexed_async_connection_with_config(&config);
    let connected = within(limit, "connecting to read the slot map", connecting).await;
    connected.map_err(|e| e.to_string())
}

async fn slots(
    conn: &mut MultiplexedConnection,
    host: &str,
    limit: Duration,
) -> Result<SlotMap, String> {
    let read = cluster_slots();
    let reading = read.query_async::<Value>(conn);
    let asked = within(limit, "reading CLUSTER SLOTS", reading).await;
    SlotMap::parse(&asked.map_err(|e| e.to_string())?, host)
}

//! Thousands of watchdog locks over all slots on one client, each renewed once a round and
//! every round over well inside a third of the lease (10,000 locks with `--ignored`).

use std::time::{Duration, Instant};

use testkit::RedisCluster;

use super::{connect_with_watchdog, WATCHDOG};

/// Holds `count` watchdog locks spread over all slots on one cluster client for a few
/// rounds, and returns how long each round took, as seen from Redis: keyspace
/// notifications tell when each renewal's PEXPIRE ran.
async fn renewal_rounds(count: usize) -> Vec<(usize, Duration)> {
    let cluster = RedisCluster::start_async().await;
    let client = connect_with_watchdog(&cluster, WATCHDOG).await;
    let names: Vec<String> = (0..count).map(|i| format!("many:{i}")).collect();
    let mut guards = Vec::with_capacity(count);
    for chunk in names.chunks(500) {
        let acquired = futures_util::future::join_all(chunk.iter().map(|name| {
            let lock = client.lock(name);
            async move { lock.lock().await }
        }))
        .await;
        for guard in acquired {
            guards.push(guard.expect("acquired"));
        }
    }
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let mut listeners = Vec::new();
    for master in cluster.masters() {
        let _: () = master
            .query(
                redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("notify-keyspace-events")
                    .arg("Eg"),
            )
            .unwrap();
        let mut pubsub = redis::Client::open(master.url())
            .unwrap()
            .get_async_pubsub()
            .await
            .unwrap();
        pubsub.subscribe("__keyevent@0__:expire").await.unwrap();
        let tx = events_tx.clone();
        listeners.push(tokio::spawn(async move {
            use futures_util::StreamExt;
            let mut messages = pubsub.on_message();
            while messages.next().await.is_some() {
                if tx.send(Instant::now()).is_err() {
                    return;
                }
            }
        }));
    }
    drop(events_tx);
    // Rounds are a second apart; a gap of a third of that separates them.
    let gap = WATCHDOG / 9;
    let mut rounds = Vec::new();
    let (mut first, mut last, mut n) = (None::<Instant>, Instant::now(), 0usize);
    // A few rounds, and the one under way then; bounded however long rounds take.
    let until = Instant::now() + WATCHDOG * 2;
    let hard_stop = until + WATCHDOG * 2;
    while (Instant::now() < until || first.is_some()) && Instant::now() < hard_stop {
        let next = tokio::time::timeout(gap, events.recv()).await;
        match next {
            Ok(Some(at)) => {
                if first.is_none() {
                    first = Some(at);
                }
                last = at;
                n += 1;
            }
            Ok(None) => break,
            Err(_) => {
                if let Some(began) = first.take() {
                    rounds.push((n, last.duration_since(began)));
                    n = 0;
                }
            }
        }
    }
    if let Some(began) = first {
        rounds.push((n, last.duration_since(began)));
    }
    assert!(guards.iter().all(|g| !g.is_lost()), "a lock was lost");
    for listener in listeners {
        listener.abort();
    }
    let unlocked =
        futures_util::future::join_all(guards.into_iter().map(|guard| guard.unlock())).await;
    assert!(unlocked.iter().all(Result::is_ok));
    rounds
}

/// Checks the rounds [`renewal_rounds`] saw with `count` locks: every lock renewed once a
/// round, each round over before the next is due (a third of the lease), most well before.
fn check_rounds(count: usize, rounds: &[(usize, Duration)]) {
    eprintln!("{count} locks: rounds (renewals, duration) {rounds:?}");
    // The first round seen may have begun before the listeners did.
    let mut whole: Vec<Duration> = rounds.iter().skip(1).map(|(_, took)| *took).collect();
    assert!(whole.len() >= 2, "{rounds:?}");
    for (renewals, took) in &rounds[1..] {
        assert_eq!(*renewals, count, "{rounds:?}");
        assert!(*took < WATCHDOG / 3, "a round took {took:?}");
    }
    whole.sort();
    let median = whole[whole.len() / 2];
    assert!(median < WATCHDOG / 6, "rounds took {median:?} (median)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_watchdog_locks_over_all_slots_renewed_well_inside_a_third_of_the_lease() {
    let rounds = renewal_rounds(2000).await;
    check_rounds(2000, &rounds);
}

/// The same with 10,000 locks: about 20 s in a debug build, so left out of `cargo test`
/// (see TESTING.md for the command and its figures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --ignored (see TESTING.md)"]
async fn ten_thousand_watchdog_locks_over_all_slots_renewed_well_inside_a_third_of_the_lease() {
    let rounds = renewal_rounds(10_000).await;
    check_rounds(10_000, &rounds);
}

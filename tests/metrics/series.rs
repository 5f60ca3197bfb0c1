//! The series an alert needs: every one at zero from the start, histograms with the
//! documented buckets, and wake-ups told apart by what cut the wait short.

use super::*;

/// Right after the process's first `Client::connect`, every counter and gauge is there at
/// zero, for every label value the crate can emit: an alert on
/// `increase(rlock_locks_lost_total[5m]) > 0` sees a process's first lost lock. A later
/// client leaves what was counted as it is.
#[tokio::test]
async fn every_series_exists_at_zero_from_the_first_client() {
    let seen = Seen::begin().await;
    let at_zero = series_in(&recorded().await.at_first_client);
    let mut expected: Vec<(&str, Vec<String>)> = Vec::new();
    for kind in KINDS {
        for outcome in ACQUIRE_OUTCOMES {
            expected.push((
                "rlock_acquires_total",
                vec![format!("kind={kind}"), format!("outcome={outcome}")],
            ));
        }
    }
    for kind in LOCK_KINDS {
        for outcome in RELEASE_OUTCOMES {
            expected.push((
                "rlock_releases_total",
                vec![format!("kind={kind}"), format!("outcome={outcome}")],
            ));
        }
    }
    for outcome in ["renewed", "not_held"] {
        expected.push(("rlock_renewals_total", vec![format!("outcome={outcome}")]));
    }
    for reason in LOST_REASONS {
        expected.push(("rlock_locks_lost_total", vec![format!("reason={reason}")]));
    }
    for source in WAKEUP_SOURCES {
        expected.push(("rlock_wakeups_total", vec![format!("source={source}")]));
    }
    for outcome in ["acknowledged", "not_acknowledged", "failed"] {
        expected.push((
            "rlock_replica_sync_total",
            vec![format!("outcome={outcome}")],
        ));
    }
    for name in [
        "rlock_renewal_failures_total",
        "rlock_resubscriptions_total",
        "rlock_held_locks",
        "rlock_waiting_tasks",
        "rlock_subscribed_channels",
    ] {
        expected.push((name, Vec::new()));
    }
    for (name, labels) in expected {
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let series = (name.to_string(), labelled(name, &labels));
        assert_eq!(
            at_zero.get(&series),
            Some(&0.0),
            "{series:?} not at zero after the first connect:\n{}",
            recorded().await.at_first_client
        );
    }

    // A second client of the process resets nothing.
    let server = RedisServer::start();
    let a = testkit::client(&server).await;
    a.lock("z:one")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let acquired = (
        "rlock_acquires_total".to_string(),
        labelled(
            "rlock_acquires_total",
            &["kind=reentrant", "outcome=acquired"],
        ),
    );
    let before = series_in(&seen.prometheus_text())[&acquired];
    assert!(before >= 1.0, "{before}");
    let _b = testkit::client(&server).await;
    assert_eq!(series_in(&seen.prometheus_text())[&acquired], before);
}

/// With the buckets the `operations` docs give, both histograms render as Prometheus
/// histograms (`_bucket{le=...}` lines), which `histogram_quantile` aggregates across
/// replicas, rather than as the exporter's default summaries.
#[tokio::test]
async fn the_documented_buckets_make_histograms() {
    let seen = Seen::begin().await;
    let server = RedisServer::start();
    let a = testkit::client(&server).await;
    let guard = a.lock("h:one").lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    guard.unlock().await.unwrap();
    let text = seen.prometheus_text();
    for line in [
        "# TYPE rlock_acquire_wait_seconds histogram",
        "rlock_acquire_wait_seconds_bucket{kind=\"reentrant\",outcome=\"acquired\",class=\"default\",le=\"5\"}",
        "rlock_acquire_wait_seconds_bucket{kind=\"reentrant\",outcome=\"acquired\",class=\"default\",le=\"+Inf\"}",
        "# TYPE rlock_hold_seconds histogram",
        "rlock_hold_seconds_bucket{kind=\"reentrant\",class=\"default\",le=\"30\"}",
        "rlock_hold_seconds_bucket{kind=\"reentrant\",class=\"default\",le=\"+Inf\"}",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    assert!(!text.contains("quantile="), "a summary in:\n{text}");
}

/// A `try_lock_for` that runs out on a held lock (a single lock's, or a lock group's)
/// counts a `deadline` wake-up, not a `ttl_bound` one; a wait that re-checks when the holder's short fixed lease runs out (no
/// unlock message) counts `ttl_bound`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_deadline_is_no_ttl_bound_wakeup() {
    let mut seen = Seen::begin().await;
    let server = RedisServer::start();
    let a = testkit::client(&server).await;
    let b = testkit::client(&server).await;
    let deadline = ["source=deadline"];
    let ttl_bound = ["source=ttl_bound"];

    let held = a.lock("w:deadline").lock().await.unwrap();
    let waiter = b.lock("w:deadline");
    let wait = waiter.try_lock_for(Duration::from_millis(300)).await;
    assert!(wait.unwrap().is_none());
    assert_eq!(seen.value("rlock_wakeups_total", &deadline), 1.0);
    assert_eq!(seen.value("rlock_wakeups_total", &ttl_bound), 0.0);
    // A lock group's wait that runs out counts the caller's deadline too.
    let group = MultiLock::new(vec![b.lock("w:deadline"), b.lock("w:free")]);
    let wait = group.try_lock_for(Duration::from_millis(300)).await;
    assert!(wait.unwrap().is_none());
    assert_eq!(seen.value("rlock_wakeups_total", &deadline), 2.0);
    assert_eq!(seen.value("rlock_wakeups_total", &ttl_bound), 0.0);
    held.unlock().await.unwrap();

    // Held with a fixed lease and never released: the waiter hears nothing, and re-checks
    // when the lease runs out.
    let expiring = a
        .lock("w:ttl")
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let got = b
        .lock("w:ttl")
        .try_lock_for(GENEROUS)
        .await
        .unwrap()
        .expect("taken once the lease ran out");
    assert!(seen.value("rlock_wakeups_total", &ttl_bound) >= 1.0);
    assert_eq!(seen.value("rlock_wakeups_total", &deadline), 2.0);
    assert_eq!(seen.value("rlock_wakeups_total", &["source=message"]), 0.0);
    got.unlock().await.unwrap();
    assert!(expiring.unlock().await.is_err(), "its lease ran out");
}

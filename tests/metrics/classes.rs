//! The `class` label: bounded whatever the lock names, by the client's rule and cap, with
//! the names past the cap counted under `other`, and a handle's own class.

use std::collections::BTreeSet;

use super::*;

/// The classes of every series the recorder renders.
fn classes_in(text: &str) -> BTreeSet<String> {
    series_in(text)
        .into_keys()
        .flat_map(|(_, labels)| labels)
        .filter_map(|label| label.strip_prefix("class=").map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_hundred_thousand_names_make_at_most_the_cap_of_classes() {
    let mut seen = Seen::begin().await;
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .lock_class_by_prefix(':')
        .max_lock_classes(8)
        .build()
        .await
        .unwrap();
    for i in 0..100_000 {
        drop(client.lock(format!("family{i}:item")));
    }
    let classes = classes_in(&seen.prometheus_text());
    let families: Vec<&String> = classes.iter().filter(|c| c.starts_with("family")).collect();
    assert_eq!(families.len(), 8, "{classes:?}");
    assert!(classes.contains("other"), "{classes:?}");
    // `default` is the other clients' of this process, which have no rule.
    let others: Vec<&String> = classes
        .iter()
        .filter(|c| !c.starts_with("family") && !["other", "default"].contains(&c.as_str()))
        .collect();
    assert!(
        others.iter().all(|c| c.as_str() == "nightly"),
        "{classes:?}"
    );
    assert_eq!(seen.value("rlock_lock_classes_folded_total", &[]), 99_992.0);
    // A class's series are made at zero with its first handle, before anything counts.
    let at_zero = series_in(&seen.prometheus_text());
    for class in families.iter().map(|c| c.as_str()).chain(["other"]) {
        let lost = (
            "rlock_locks_lost_total".to_string(),
            vec!["class=".to_string() + class, "reason=expired".to_string()],
        );
        assert_eq!(at_zero.get(&lost), Some(&0.0), "{lost:?}");
    }

    // A lock of an admitted class counts there; one past the cap, under `other`.
    let acquired = |class: &str| {
        let class = format!("class={class}");
        [
            "kind=reentrant".to_string(),
            "outcome=acquired".to_string(),
            class,
        ]
    };
    let first = classes
        .iter()
        .find(|c| c.starts_with("family"))
        .unwrap()
        .clone();
    let admitted = client.lock(format!("{first}:x")).lock().await.unwrap();
    admitted.unlock().await.unwrap();
    let labels = acquired(&first);
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    assert_eq!(seen.value("rlock_acquires_total", &labels), 1.0);
    let folded = client.lock("late:x").lock().await.unwrap();
    folded.unlock().await.unwrap();
    let labels = acquired("other");
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    assert_eq!(seen.value("rlock_acquires_total", &labels), 1.0);

    // A handle's own class, on a client without a rule.
    let plain = testkit::client(&server).await;
    let nightly = plain.lock("report:2026-11-28").with_class("nightly");
    nightly.lock().await.unwrap().unlock().await.unwrap();
    let labels = acquired("nightly");
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    assert_eq!(seen.value("rlock_acquires_total", &labels), 1.0);
    assert!(
        !seen.prometheus_text().contains("report:"),
        "a lock name in a label"
    );
}

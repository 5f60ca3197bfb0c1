//! FencedLock: every acquire draws a token greater than all before it, and a fenced write
//! refuses a holder whose lock expired while it was paused. A RedLock of fenced locks keeps
//! its tokens growing across holders that each held a different majority.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis_rlock::{Fenced, LostReason, RedLock};
use testkit::{client, lock_hash, RedisGroup, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);

async fn counter(server: &RedisServer, name: &str) -> Option<u64> {
    redis::cmd("GET")
        .arg(format!("redisson_lock_token:{{{name}}}"))
        .query_async(&mut server.raw().await)
        .await
        .unwrap()
}

#[tokio::test]
async fn every_acquire_draws_a_greater_token_across_clients_and_reentry() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let lock = a.fenced_lock("ledger");

    let outer = lock.lock().await.unwrap();
    let first = outer.fencing_token().unwrap();
    assert_eq!(counter(&server, "ledger").await, Some(first));
    // The lock itself is an RLock's hash, as Redisson's RFencedLock keeps it.
    let hash = lock_hash(&mut server.raw().await, "ledger").await;
    assert_eq!(hash.get(outer.owner()), Some(&1));

    // A re-entry draws a new token too, as in Redisson.
    let inner = lock.lock().await.unwrap();
    let second = inner.fencing_token().unwrap();
    assert!(second > first);
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();

    let other = b.fenced_lock("ledger");
    let mut last = second;
    for guard in [
        other.lock().await.unwrap(),
        other
            .lock_with_lease(Duration::from_secs(10))
            .await
            .unwrap(),
        other.try_lock().await.unwrap().unwrap(),
        other
            .try_lock_for(Duration::from_secs(1))
            .await
            .unwrap()
            .unwrap(),
    ] {
        let token = guard.fencing_token().unwrap();
        assert!(token > last, "{token} after {last}");
        last = token;
        guard.unlock().await.unwrap();
    }
    // A busy try draws nothing.
    let held = lock.lock().await.unwrap();
    let drawn = counter(&server, "ledger").await;
    assert!(other.try_lock().await.unwrap().is_none());
    assert_eq!(counter(&server, "ledger").await, drawn);
    held.unlock().await.unwrap();

    // Other kinds have no token.
    let plain = a.lock("plain").lock().await.unwrap();
    assert_eq!(plain.fencing_token(), None);
    plain.unlock().await.unwrap();
}

#[tokio::test]
async fn tokens_follow_the_order_in_which_contending_tasks_got_the_lock() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (lock, order) = (
            if i % 2 == 0 { &a } else { &b }.fenced_lock("contended"),
            order.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let guard = lock.lock().await.unwrap();
                order.lock().unwrap().push(guard.fencing_token().unwrap());
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .unwrap()
            .unwrap();
    }
    let order = order.lock().unwrap();
    assert_eq!(order.len(), 40);
    assert!(
        order.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens in acquisition order: {order:?}"
    );
}

#[tokio::test]
async fn a_holder_whose_lease_ran_out_cannot_overwrite_a_later_holders_write() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    // A holder that stops (a pause, here a short fixed lease nobody renews) past its lease.
    let stale = a
        .fenced_lock("account")
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let stale_token = stale.fencing_token().unwrap();
    assert!(a
        .fenced_set("account:balance", stale_token, b"100")
        .await
        .unwrap());
    let reason = tokio::time::timeout(GENEROUS, stale.lost()).await.unwrap();
    assert_eq!(reason, LostReason::Expired);

    let fresh = b.fenced_lock("account").lock().await.unwrap();
    let fresh_token = fresh.fencing_token().unwrap();
    assert!(fresh_token > stale_token);
    assert!(b
        .fenced_set("account:balance", fresh_token, b"70")
        .await
        .unwrap());
    // The same holder may write again with its token.
    assert!(b
        .fenced_set("account:balance", fresh_token, b"60")
        .await
        .unwrap());

    // The stale holder wakes up and writes: refused, and the value is the fresh holder's.
    assert!(!a
        .fenced_set("account:balance", stale_token, b"0")
        .await
        .unwrap());
    let mut raw = server.raw().await;
    let balance: String = redis::cmd("GET")
        .arg("account:balance")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(balance, "60");
    let fence: u64 = redis::cmd("GET")
        .arg("redis_rlock_fence:{account:balance}")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(fence, fresh_token);
    // And its unlock touches nothing.
    let err = stale.unlock().await.unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::Expired));
    assert!(b.fenced_lock("account").is_locked().await.unwrap());
    fresh.unlock().await.unwrap();

    assert!(a
        .fenced_set("", 1, b"x")
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(a
        .fenced_lock("")
        .lock()
        .await
        .unwrap_err()
        .is_invalid_argument());
}

/// One client per server of `group`.
async fn clients_of(group: &RedisGroup) -> Vec<redis_rlock::Client> {
    let mut clients = Vec::new();
    for server in &group.servers {
        clients.push(client(server).await);
    }
    clients
}

fn fenced_redlock(clients: &[redis_rlock::Client], name: &str) -> RedLock<Fenced> {
    RedLock::new(clients.iter().map(|c| c.fenced_lock(name)).collect())
        .with_node_timeout(Duration::from_millis(500))
}

#[tokio::test]
async fn a_fenced_redlock_token_grows_across_holders_that_share_one_master() {
    let mut group = RedisGroup::start(5);
    let (a, b) = (clients_of(&group).await, clients_of(&group).await);
    // Counters that disagree: master 0 has handed out many more tokens than the others.
    redis::cmd("SET")
        .arg("redisson_lock_token:{payout}")
        .arg(100)
        .query_async::<()>(&mut group.servers[0].raw().await)
        .await
        .unwrap();

    // A holds masters 0, 1 and 2 (3 and 4 are down).
    group.servers[3].kill();
    group.servers[4].kill();
    let first = fenced_redlock(&a, "payout").lock().await.unwrap();
    let first_token = first.fencing_token().unwrap();
    assert_eq!(first_token, 101, "the greatest the majority drew");
    // Written back to every master that holds it, before the guard was returned.
    for server in &group.servers[..3] {
        assert_eq!(counter(server, "payout").await, Some(101));
    }
    first.unlock().await.unwrap();

    // B holds masters 2, 3 and 4 (3 and 4 back, empty; 0 and 1 down): only master 2 is
    // shared with A's majority, and its counter is what keeps B's token above A's.
    group.servers[3].restart();
    group.servers[4].restart();
    group.servers[0].kill();
    group.servers[1].kill();
    let second = fenced_redlock(&b, "payout").lock().await.unwrap();
    let second_token = second.fencing_token().unwrap();
    assert!(
        second_token > first_token,
        "{second_token} after {first_token}"
    );
    for server in &group.servers[2..] {
        assert_eq!(counter(server, "payout").await, Some(second_token));
    }
    second.unlock().await.unwrap();
}

#[tokio::test]
async fn fenced_redlock_tokens_follow_the_order_in_which_contending_tasks_got_it() {
    let group = RedisGroup::start(5);
    let (a, b) = (clients_of(&group).await, clients_of(&group).await);
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (redlock, order) = (
            fenced_redlock(if i % 2 == 0 { &a } else { &b }, "contended"),
            order.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let guard = redlock.lock().await.unwrap();
                order.lock().unwrap().push(guard.fencing_token().unwrap());
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .unwrap()
            .unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order.len(), 20);
    assert!(
        order.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens in acquisition order: {order:?}"
    );
    // A RedLock of plain locks has no token.
    let plain = RedLock::new(a.iter().map(|c| c.lock("plain")).collect());
    let guard = plain.lock().await.unwrap();
    assert_eq!(guard.fencing_token(), None);
    guard.unlock().await.unwrap();
}

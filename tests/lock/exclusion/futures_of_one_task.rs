//! Futures of one task: explicit owners and non-reentrant handles.
//!
//! By default the owner is the task, so sections that one task runs concurrently re-enter one
//! another's holds. `with_owner` (one owner per section) and `non_reentrant` keep them apart.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::stream::{self, FuturesUnordered, StreamExt};
use redis_rlock::{DistributedLock, Lock, MultiLock};
use testkit::{client, RedisServer};

/// Who is inside now, and the most that ever were at once.
#[derive(Default)]
struct Inside {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Inside {
    /// One critical section under `lock`: in, a few yields and a short sleep, out.
    async fn section<L: DistributedLock>(&self, lock: L) {
        let guard = lock.lock().await.unwrap();
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        redis_rlock::DistributedGuard::unlock(guard).await.unwrap();
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

/// Four sections run in ONE task, with `join!`, `buffer_unordered`, `FuturesUnordered` and
/// two with `select!` (the loser is dropped when the winner ends): the most inside at once
/// under each, in that order. `lock(i)` gives section `i`'s handle.
async fn most_inside_in_one_task<L: DistributedLock>(lock: impl Fn(usize) -> L) -> [usize; 4] {
    use testkit::bounded;
    let joined = Inside::default();
    bounded("join!", async {
        tokio::join!(
            joined.section(lock(0)),
            joined.section(lock(1)),
            joined.section(lock(2)),
            joined.section(lock(3)),
        )
    })
    .await;
    let buffered = Inside::default();
    bounded("buffer_unordered", async {
        stream::iter(0..4)
            .map(|i| buffered.section(lock(i)))
            .buffer_unordered(4)
            .collect::<Vec<()>>()
            .await
    })
    .await;
    let unordered = Inside::default();
    bounded("FuturesUnordered", async {
        (0..4)
            .map(|i| unordered.section(lock(i)))
            .collect::<FuturesUnordered<_>>()
            .collect::<Vec<()>>()
            .await
    })
    .await;
    let selected = Inside::default();
    bounded("select!", async {
        tokio::select! {
            () = selected.section(lock(0)) => {}
            () = selected.section(lock(1)) => {}
        }
    })
    .await;
    [
        joined.most(),
        buffered.most(),
        unordered.most(),
        selected.most(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_the_futures_of_one_task_share_its_hold() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let most = most_inside_in_one_task(|_| client.lock("trap")).await;
    // The trap the docs state: one owner, so every section re-enters.
    assert!(most.iter().all(|&most| most > 1), "{most:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_per_future_keeps_one_inside_for_every_kind() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let owned = |lock: Lock<_>| lock.with_owner(client.new_owner());
    assert_eq!(
        most_inside_in_one_task(|_| owned(client.lock("plain"))).await,
        [1; 4]
    );
    let fair = |_| client.fair_lock("fair").with_owner(client.new_owner());
    assert_eq!(most_inside_in_one_task(fair).await, [1; 4]);
    let fenced = |_| client.fenced_lock("fenced").with_owner(client.new_owner());
    assert_eq!(most_inside_in_one_task(fenced).await, [1; 4]);
    let write = |_| {
        let rw = client.read_write_lock("rw");
        rw.write_lock().with_owner(client.new_owner())
    };
    assert_eq!(most_inside_in_one_task(write).await, [1; 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_reentrant_handle_keeps_one_inside_for_every_kind() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let plain = client.lock("plain").non_reentrant();
    assert_eq!(most_inside_in_one_task(|_| plain.clone()).await, [1; 4]);
    let fair = client.fair_lock("fair").non_reentrant();
    assert_eq!(most_inside_in_one_task(|_| fair.clone()).await, [1; 4]);
    let fenced = client.fenced_lock("fenced").non_reentrant();
    assert_eq!(most_inside_in_one_task(|_| fenced.clone()).await, [1; 4]);
    let write = client.read_write_lock("rw").write_lock().non_reentrant();
    assert_eq!(most_inside_in_one_task(|_| write.clone()).await, [1; 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_take_owners_and_non_reentrant_handles_too() {
    let group = testkit::RedisGroup::start(3);
    let clients = testkit::group::clients(&group, Duration::from_secs(30)).await;
    let redlock = testkit::group::redlock(&clients, "red");
    let owned = |_| redlock.clone().with_owner(clients[0].new_owner());
    assert_eq!(most_inside_in_one_task(owned).await, [1; 4]);
    let single = redlock.clone().non_reentrant();
    assert_eq!(most_inside_in_one_task(|_| single.clone()).await, [1; 4]);
    let multi = MultiLock::new(vec![clients[0].lock("m1"), clients[1].lock("m2")]);
    let owned = |_| multi.clone().with_owner(clients[0].new_owner());
    assert_eq!(most_inside_in_one_task(owned).await, [1; 4]);
    assert_eq!(
        most_inside_in_one_task(|_| multi.clone().non_reentrant()).await,
        [1; 4]
    );
    // By default the group re-enters within the task.
    assert!(most_inside_in_one_task(|_| redlock.clone()).await[0] > 1);
}

/// An owner re-enters its own holds from any task, and only its own; a non-reentrant handle
/// says busy to a second `try_lock` in the same task.
#[tokio::test]
async fn an_owner_reenters_only_its_own_holds_from_any_task() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let (a, b) = (client.new_owner(), client.new_owner());
    let as_a = client.lock("o").with_owner(a);
    let outer = as_a.lock().await.unwrap();
    assert_eq!(outer.owner(), format!("{}:{}", client.id(), a.id()));
    // Another task, same owner: a re-entry.
    let inner = tokio::spawn({
        let as_a = as_a.clone();
        async move { as_a.try_lock().await.unwrap() }
    })
    .await
    .unwrap()
    .expect("the owner re-enters from another task");
    assert_eq!(as_a.hold_count().await.unwrap(), 2);
    // This task, another owner (and the task's own identity): busy.
    assert!(client
        .lock("o")
        .with_owner(b)
        .try_lock()
        .await
        .unwrap()
        .is_none());
    assert!(client.lock("o").try_lock().await.unwrap().is_none());
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    assert!(!as_a.is_locked().await.unwrap());

    let mutex = client.lock("m").non_reentrant();
    let first = mutex.lock().await.unwrap();
    assert!(mutex.try_lock().await.unwrap().is_none(), "no re-entry");
    assert_eq!(
        mutex.hold_count().await.unwrap(),
        0,
        "each guard is its own owner"
    );
    let waiting = tokio::spawn({
        let mutex = mutex.clone();
        async move { mutex.lock().await.unwrap() }
    });
    first.unlock().await.unwrap();
    let second = testkit::bounded("the waiter", waiting).await.unwrap();
    assert!(!second.is_lost());
    second.unlock().await.unwrap();

    // A read lock held by one owner: another owner of the same task may not write, where
    // the task itself would be refused an upgrade.
    let rw = client.read_write_lock("rw");
    let reading = rw.read_lock().with_owner(a).lock().await.unwrap();
    let write_b = rw.write_lock().with_owner(b);
    assert!(write_b.try_lock().await.unwrap().is_none());
    reading.unlock().await.unwrap();
    write_b
        .try_lock()
        .await
        .unwrap()
        .expect("free now")
        .unlock()
        .await
        .unwrap();
}

//! W7: W3-style contention on the rest of the family. A `ReadWriteLock` with 6 reader tasks
//! and 2 writer tasks, and a `Semaphore` of 3 permits with 8 tasks taking one each; every
//! task of one client takes (blocking), holds 1 ms, releases, for 5 s; figures by role. On
//! the current-thread and the multi-thread runtime. Server on CPU 1, client on CPU 0.
//!
//! `cargo bench --bench w7` (`QUICK=1`: 2 s each; `FLAVOURS` picks the runtimes).

use testkit as support;

mod common;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use redis_rlock::{Client, ReadLock, Semaphore, WriteLock};

use common::contend::{contend_roles, Contention, ContentionRow, Held, Taker};
use common::options;
use common::placement::{self, SPLIT};
use common::runtime::{self, Flavour};

const READERS: usize = 6;
const WRITERS: usize = 2;
const PERMITS: u64 = 3;
const PERMIT_TASKS: usize = 8;

/// One contending task's way in.
#[derive(Clone)]
enum Role {
    Read(ReadLock),
    Write(WriteLock),
    Permit(Semaphore),
}

impl Taker for Role {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>> {
        Box::pin(async move {
            match self {
                Role::Read(lock) => Held::One(lock.lock().await.unwrap()),
                Role::Write(lock) => Held::One(lock.lock().await.unwrap()),
                Role::Permit(semaphore) => Held::Permits(semaphore.acquire(1).await.unwrap()),
            }
        })
    }
}

/// The read-write lock's readers and writers, then the semaphore's tasks, `turns` slices
/// of `run` each, on the current runtime.
async fn contenders(url: String, run: Duration, turns: u32) -> Vec<ContentionRow> {
    let client = Client::connect(url.as_str()).await.unwrap();
    let rw = client.read_write_lock("w7:rw");
    let semaphore = client.semaphore("w7:pool");
    assert!(semaphore.try_set_permits(PERMITS).await.unwrap());
    let slice = run / turns;
    let mut by_role: [Contention; 2] = Default::default();
    let mut permits: [Contention; 1] = Default::default();
    for _ in 0..turns {
        let mut tasks: Vec<(usize, Role)> = (0..READERS)
            .map(|_| (0, Role::Read(rw.read_lock())))
            .collect();
        tasks.extend((0..WRITERS).map(|_| (1, Role::Write(rw.write_lock()))));
        contend_roles(tasks, slice, &mut by_role).await;
        let tasks = (0..PERMIT_TASKS)
            .map(|_| (0, Role::Permit(semaphore.clone())))
            .collect();
        contend_roles(tasks, slice, &mut permits).await;
    }
    let [readers, writers] = by_role;
    let [permits] = permits;
    vec![
        readers.summary("ReadWriteLock: 6 readers"),
        writers.summary("ReadWriteLock: 2 writers"),
        permits.summary("Semaphore(3): 8 tasks"),
    ]
}

fn main() {
    let run = options::contention();
    let turns: u32 = if options::quick() { 2 } else { 5 };
    let (server, pinned) = placement::start(SPLIT);
    for flavour in [Flavour::CurrentThread, Flavour::MultiThread] {
        if !options::wanted("FLAVOURS", flavour.id()) {
            continue;
        }
        let runtime = flavour.runtime();
        let rows = flavour.run(&runtime, contenders(server.url(), run, turns));
        runtime::shut_down(runtime);
        server.cli(&["FLUSHALL"]);
        for row in &rows {
            row.json_of("W7", |json| {
                json.str("flavour", flavour.id())
                    .raw("workers", flavour.worker_threads())
                    .raw("pinned", pinned)
            });
        }
        let title = format!(
            "W7: tasks of one client: take, hold 1 ms, release, for {run:?} (in turns; {})",
            flavour.described()
        );
        ContentionRow::table(&title, &rows, ("holders", 8), |row| {
            if row.contender.starts_with("Semaphore") {
                format!("≤ {PERMITS}")
            } else if row.contender.contains("writers") {
                "1".to_string()
            } else {
                "many".to_string()
            }
        });
    }
}

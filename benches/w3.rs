//! W3: 8 tasks of one client contend for one key: lock (blocking, defaults), hold 1 ms,
//! unlock, for 5 s: `RLock`, `FairLock`, `RLock` with the wait registry on (`RLock+reg`: the price of
//! `ClientBuilder::wait_registry`: every contended acquire waits) and rslock 0.10, taking
//! turns a slice of the run each, with each one's acquisitions/s as a ratio to rslock's; on the current-thread and
//! the multi-thread runtime. Server on CPU 1, client on CPU 0.
//!
//! `cargo bench --bench w3` (`QUICK=1`: 2 s each; `FLAVOURS` picks the runtimes).

use testkit as support;

mod common;

use std::time::Duration;

use redis_rlock::Client;
use rslock::LockManager;

use common::contend::{contend, Contention, ContentionRow, Rslock, Single};
use common::options;
use common::placement::{self, SPLIT};
use common::runtime::{self, Flavour};

/// The three contenders in turns, `turns` slices of `run` each, on the current runtime.
async fn contenders(url: String, run: Duration, turns: u32) -> Vec<ContentionRow> {
    let client = Client::connect(url.as_str()).await.unwrap();
    let registry = Client::builder(url.as_str())
        .wait_registry(true)
        .build()
        .await
        .unwrap();
    let rslock = Rslock {
        manager: LockManager::new(vec![url]),
        resource: b"w3:rslock",
    };
    let slice = run / turns;
    let mut figures: [Contention; 4] = Default::default();
    for _ in 0..turns {
        contend(Single(client.lock("w3:rlock")), slice, &mut figures[0]).await;
        contend(Single(client.fair_lock("w3:fair")), slice, &mut figures[1]).await;
        contend(Single(registry.lock("w3:registry")), slice, &mut figures[2]).await;
        contend(rslock.clone(), slice, &mut figures[3]).await;
    }
    ["RLock", "FairLock", "RLock+reg", "rslock"]
        .into_iter()
        .zip(figures)
        .map(|(name, figures)| figures.summary(name))
        .collect()
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
        let rslock = rows[3].per_sec;
        for row in &rows {
            row.json(|json| {
                json.str("flavour", flavour.id())
                    .raw("workers", flavour.worker_threads())
                    .num("ratio_to_rslock", row.per_sec / rslock, 3)
                    .raw("pinned", pinned)
            });
        }
        let title = format!(
            "W3: 8 tasks of one client on one key: lock, hold 1 ms, unlock, for {run:?} (in turns; {})",
            flavour.described()
        );
        ContentionRow::table(&title, &rows, ("×rslock", 8), |row| {
            format!("{:.2}", row.per_sec / rslock)
        });
    }
}

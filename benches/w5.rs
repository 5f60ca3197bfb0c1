//! W5: a RedLock over five local masters. W1 in turns for the raw hash-script floor on one
//! master and on five (each step done at a majority), `RLock` and the `RedLock`, each
//! five-master contender as a ratio to its one-node counterpart; then W3 with the
//! `RedLock`. Current-thread runtimes, one per contender; every server on CPU 1, client on CPU 0.
//!
//! `cargo bench --bench w5` (`QUICK`, `PAIRS`, `WARMUP` as for W1).

use testkit as support;

mod common;

use redis_rlock::{Client, RedLock};
use support::RedisServer;

use common::contend::{contend, Contention, ContentionRow};
use common::floor::{connect, RawHash};
use common::interleave::{interleaved, pair_of, place, Contender};
use common::options;
use common::placement::{self, SPLIT};
use common::report::{fixed, Json, Table};
use common::runtime::Flavour;
use common::stats::Figures;

/// A client of each of `urls`.
async fn clients(urls: &[String]) -> Vec<Client> {
    let mut clients = Vec::new();
    for url in urls {
        clients.push(Client::connect(url.as_str()).await.unwrap());
    }
    clients
}

/// The raw floor on the first master alone, or on all of them at a majority.
async fn floor(urls: Vec<String>, all: bool) -> Contender {
    let urls = if all { &urls[..] } else { &urls[..1] };
    let mut conns = Vec::new();
    for url in urls {
        conns.push(connect(url).await);
    }
    let floor = RawHash::new(conns, "w5:raw", 0);
    match all {
        false => Contender::new("floor", "raw hash floor (1 node)", move || floor.pair()),
        true => Contender::new(
            "floor5",
            "raw hash floor (5 masters, majority)",
            move || floor.pair(),
        ),
    }
}

async fn rlock(urls: Vec<String>) -> Contender {
    let lock = Client::connect(urls[0].as_str())
        .await
        .unwrap()
        .lock("w5:single");
    let pair = pair_of(lock, |lock| {
        Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    });
    Contender::new("lock", "RLock lock() (1 node)", pair)
}

async fn redlock(urls: Vec<String>) -> Contender {
    let clients = clients(&urls).await;
    let redlock = RedLock::new(clients.iter().map(|c| c.lock("w5:w1")).collect());
    let pair = pair_of(redlock, |lock| {
        Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    });
    Contender::new("redlock", "RedLock lock() (5 masters)", pair)
}

/// W1 over five masters: each contender on a runtime of its own.
fn w1(urls: &[String], warmup: usize, pairs: usize) -> Vec<Figures> {
    let flavour = Flavour::CurrentThread;
    let placed = vec![
        place(flavour, floor(urls.to_vec(), false)),
        place(flavour, floor(urls.to_vec(), true)),
        place(flavour, rlock(urls.to_vec())),
        place(flavour, redlock(urls.to_vec())),
    ];
    interleaved(flavour, placed, warmup, pairs)
}

/// W3 with a `RedLock` over five masters.
async fn w3(urls: Vec<String>) -> ContentionRow {
    let clients = clients(&urls).await;
    let contended = RedLock::new(clients.iter().map(|c| c.lock("w5:w3")).collect());
    let mut figures = Contention::default();
    contend(contended, options::contention(), &mut figures).await;
    figures.summary("RedLock")
}

fn print(w1: &[Figures], w3: &ContentionRow, pinned: bool) {
    // Each five-master contender beside its own one-node counterpart.
    let ratios: Vec<f64> = w1
        .iter()
        .zip([0, 0, 2, 2])
        .map(|(f, one_node)| f.percentile(0.5) / w1[one_node].percentile(0.5))
        .collect();
    for (f, ratio) in w1.iter().zip(&ratios) {
        Json::new("W5")
            .str("contender", f.name)
            .raw("pairs", f.micros.len())
            .num("p50_us", f.percentile(0.5), 1)
            .num("p99_us", f.percentile(0.99), 1)
            .num("ops_per_s", f.ops_per_sec(), 0)
            .num("client_cpu_us_per_pair", f.cpu_per_pair(), 1)
            .num("ratio_p50_to_one_node", *ratio, 3)
            .raw("pinned", pinned)
            .print();
    }
    w3.json(|json| json.raw("pinned", pinned));
    let table = Table::new(
        &format!("W5: RedLock over 5 masters (all servers pinned: {pinned}); W1 in turns"),
        &[
            ("contender", 38),
            ("p50 µs", 9),
            ("p99 µs", 9),
            ("pairs/s", 10),
            ("client CPU µs", 14),
            ("×one node p50", 13),
        ],
    );
    for (f, ratio) in w1.iter().zip(&ratios) {
        table.row(&[
            f.name.to_string(),
            fixed(f.percentile(0.5), 1),
            fixed(f.percentile(0.99), 1),
            fixed(f.ops_per_sec(), 0),
            fixed(f.cpu_per_pair(), 1),
            fixed(*ratio, 2),
        ]);
    }
    ContentionRow::table(
        "W5: W3 with the RedLock",
        std::slice::from_ref(w3),
        ("", 0),
        |_| String::new(),
    );
}

fn main() {
    let (warmup, pairs) = options::pairs();
    let (first, pinned) = placement::start(SPLIT);
    let others: Vec<RedisServer> = (0..4).map(|_| RedisServer::start()).collect();
    let pinned = pinned
        && others
            .iter()
            .all(|other| placement::pin_server(other, SPLIT.server_cpu));
    let urls: Vec<String> = std::iter::once(&first)
        .chain(&others)
        .map(RedisServer::url)
        .collect();
    let w1 = w1(&urls, warmup, pairs);
    let flavour = Flavour::CurrentThread;
    let runtime = flavour.runtime();
    let w3 = flavour.run(&runtime, w3(urls));
    print(&w1, &w3, pinned);
}

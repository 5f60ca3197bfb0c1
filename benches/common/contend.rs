//! W3's way of measuring (and W5's W3): 8 tasks of one client contend for one lock: lock
//! (blocking, defaults), hold 1 ms, unlock, over and over for a while.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use redis_rlock::{DistributedLock, GroupGuard, LockGuard, RedLock, SemaphoreGuard};
use rslock::LockManager;

use crate::common::report::{Json, Table};
use crate::common::stats::{at, sorted};

/// Tasks contending for the one lock.
pub const TASKS: usize = 8;

/// A held lock of any kind, released after the hold.
pub enum Held {
    One(LockGuard),
    Group(GroupGuard),
    Rslock(rslock::Lock),
    /// W7: permits of a semaphore.
    Permits(SemaphoreGuard),
}

impl Held {
    async fn unlock(self) {
        match self {
            Held::One(guard) => guard.unlock().await.unwrap(),
            Held::Group(guard) => guard.unlock().await.unwrap(),
            // Through the manager that took it.
            Held::Rslock(lock) => lock.lock_manager.unlock(&lock).await,
            Held::Permits(guard) => guard.release().await.unwrap(),
        }
    }
}

/// Something that waits for its lock and returns it held.
pub trait Taker: Clone + Send + Sync + 'static {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>>;
}

/// Any single-node lock kind.
#[derive(Clone)]
pub struct Single<L>(pub L);

impl<L: DistributedLock<Guard = LockGuard>> Taker for Single<L> {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>> {
        Box::pin(async move { Held::One(self.0.lock().await.unwrap()) })
    }
}

impl Taker for RedLock {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>> {
        Box::pin(async move { Held::Group(self.lock().await.unwrap()) })
    }
}

/// rslock 0.10 on one resource: `acquire` (30 s ttl) loops until it has the lock.
#[derive(Clone)]
pub struct Rslock {
    pub manager: LockManager,
    pub resource: &'static [u8],
}

impl Taker for Rslock {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>> {
        Box::pin(async move {
            let guard = self
                .manager
                .acquire(self.resource, Duration::from_secs(30))
                .await
                .unwrap();
            Held::Rslock(guard.lock)
        })
    }
}

/// What W3 measured of one contender, over one or more runs.
#[derive(Default)]
pub struct Contention {
    /// Every wait, in ms.
    waits: Vec<f64>,
    /// Acquisitions of each task, summed over the runs.
    per_task: Vec<usize>,
    elapsed_s: f64,
}

/// One task of [`contend`]: takes, holds and releases the lock until `deadline`; returns
/// its waits, in ms. The hold is a thread sleep on the blocking pool: tokio's timer rounds
/// 1 ms up to ~2 ms.
async fn contending_task(lock: impl Taker, deadline: Instant) -> Vec<f64> {
    let mut waits = Vec::new();
    while Instant::now() < deadline {
        let asked = Instant::now();
        let guard = lock.take().await;
        waits.push(asked.elapsed().as_secs_f64() * 1e3);
        tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(1)))
            .await
            .unwrap();
        guard.unlock().await;
    }
    waits
}

/// [`TASKS`] tasks contend for `lock` for `run`; adds what they measured to `figures`.
pub async fn contend(lock: impl Taker, run: Duration, figures: &mut Contention) {
    let started = Instant::now();
    let deadline = started + run;
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| tokio::spawn(contending_task(lock.clone(), deadline)))
        .collect();
    figures.per_task.resize(TASKS, 0);
    for (i, task) in tasks.into_iter().enumerate() {
        let task_waits = task.await.unwrap();
        figures.per_task[i] += task_waits.len();
        figures.waits.extend(task_waits);
    }
    figures.elapsed_s += started.elapsed().as_secs_f64();
}

/// W7: tasks in roles (a read-write lock's readers and writers) contend for one lock for
/// `run`: each task takes with its own taker; adds what the tasks of role `r` measured to
/// `figures[r]` (per-task counts in the order the roles' tasks were given).
pub async fn contend_roles<T: Taker>(
    takers: Vec<(usize, T)>,
    run: Duration,
    figures: &mut [Contention],
) {
    let started = Instant::now();
    let deadline = started + run;
    let tasks: Vec<_> = takers
        .into_iter()
        .map(|(role, lock)| (role, tokio::spawn(contending_task(lock, deadline))))
        .collect();
    let mut counts = vec![Vec::new(); figures.len()];
    for (role, task) in tasks {
        let task_waits = task.await.unwrap();
        counts[role].push(task_waits.len());
        figures[role].waits.extend(task_waits);
    }
    let elapsed = started.elapsed().as_secs_f64();
    for (figures, counts) in figures.iter_mut().zip(counts) {
        figures.per_task.resize(counts.len(), 0);
        for (total, n) in figures.per_task.iter_mut().zip(counts) {
            *total += n;
        }
        figures.elapsed_s += elapsed;
    }
}

/// One contender's summary, for the JSON line and the table.
pub struct ContentionRow {
    pub contender: String,
    pub per_sec: f64,
    p50: f64,
    p99: f64,
    max: f64,
    fewest: usize,
    most: usize,
    tasks: usize,
    run_s: f64,
}

impl Contention {
    /// The summary of what was measured, under `contender`'s name.
    pub fn summary(self, contender: &str) -> ContentionRow {
        let waits = sorted(self.waits);
        ContentionRow {
            contender: contender.to_string(),
            per_sec: waits.len() as f64 / self.elapsed_s,
            p50: at(&waits, 0.5),
            p99: at(&waits, 0.99),
            max: waits[waits.len() - 1],
            fewest: *self.per_task.iter().min().unwrap(),
            most: *self.per_task.iter().max().unwrap(),
            tasks: self.per_task.len(),
            run_s: self.elapsed_s,
        }
    }
}

impl ContentionRow {
    /// The W3 JSON line; `extra` adds fields (flavour, ratio).
    pub fn json(&self, extra: impl FnOnce(Json) -> Json) {
        self.json_of("W3", extra);
    }

    /// The JSON line of `workload` (W3, or W7).
    pub fn json_of(&self, workload: &str, extra: impl FnOnce(Json) -> Json) {
        let json = Json::new(workload)
            .str("contender", &self.contender)
            .raw("tasks", self.tasks)
            .num("run_s", self.run_s, 1)
            .num("acquisitions_per_s", self.per_sec, 0)
            .num("wait_p50_ms", self.p50, 2)
            .num("wait_p99_ms", self.p99, 2)
            .num("wait_max_ms", self.max, 2)
            .raw("per_task_min", self.fewest)
            .raw("per_task_max", self.most);
        extra(json).print();
    }

    /// The table's columns, before any of the caller's own.
    pub const COLUMNS: [(&'static str, usize); 6] = [
        ("contender", 10),
        ("acq/s", 8),
        ("wait p50", 9),
        ("wait p99", 9),
        ("wait max", 9),
        ("per task", 13),
    ];

    /// The cells of [`ContentionRow::COLUMNS`].
    pub fn cells(&self) -> Vec<String> {
        vec![
            self.contender.clone(),
            format!("{:.0}", self.per_sec),
            format!("{:.2}", self.p50),
            format!("{:.2}", self.p99),
            format!("{:.2}", self.max),
            format!("{}–{}", self.fewest, self.most),
        ]
    }

    /// Prints a table of `rows` with one more column from `last` for each.
    pub fn table(
        title: &str,
        rows: &[ContentionRow],
        last: (&str, usize),
        cell: impl Fn(&ContentionRow) -> String,
    ) {
        let mut columns = Self::COLUMNS.to_vec();
        columns.push(last);
        let table = Table::new(title, &columns);
        for row in rows {
            let mut cells = row.cells();
            cells.push(cell(row));
            table.row(&cells);
        }
    }
}

/// The figures [`ContentionRow::cells`] shows, as numbers, for a table of the caller's own.
impl ContentionRow {
    /// Wait p50, p99 and max, in ms.
    pub fn waits_ms(&self) -> [f64; 3] {
        [self.p50, self.p99, self.max]
    }

    /// The fewest and the most acquisitions of one task.
    pub fn per_task(&self) -> (usize, usize) {
        (self.fewest, self.most)
    }

    /// Acquisitions in all.
    pub fn acquisitions(&self) -> f64 {
        self.per_sec * self.run_s
    }
}

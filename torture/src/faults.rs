//! The faults, and the schedule that draws them: each one is injected, recorded with its
//! time window, and judged a hit or a miss (a pause that found no holder tests nothing).

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use super::backend::{with_backend, BackendJob, LockBackend, LOCK_NAME};
use super::clock::{self, Micros};
use super::config::WorkerSpec;
use super::events::WorkerId;
use super::fleet::{Fleet, Live};
use super::history::in_section_at;
use testkit::{key_slot, RedisCluster, RedisServer};

/// What can go wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// SIGSTOP a worker inside its critical section for longer than the lease, then SIGCONT:
    /// a GC pause or a swapped-out process.
    PauseHolder,
    /// SIGKILL a worker inside its critical section, and start a replacement: a crash.
    KillHolder,
    /// SIGKILL the lock server, leave it down a while, and start it again on its data
    /// (append-only file, fsync always): a crash and restart of Redis.
    RestartLockServer,
    /// SIGKILL as many lock servers as may be down with the lock still held (a minority of
    /// a `RedLock`'s masters), leave them down a while, and start them again on their data.
    MinorityDown,
    /// `CLIENT KILL TYPE pubsub` on the lock server: every waiter's subscription drops.
    KillPubSubConnections,
    /// `CLIENT KILL TYPE normal` on the lock server: every command connection drops (lock
    /// calls, renewals, unlocks in flight).
    KillCommandConnections,
    /// `CLUSTER FAILOVER` on a replica of the lock's master (`cluster` mode): the replica
    /// catches up and takes the slots over, so nothing is lost.
    FailoverMaster,
    /// The lock's hash slot moved to another master with its keys (`cluster` mode):
    /// `MIGRATING`/`IMPORTING`, `MIGRATE`, `SETSLOT ... NODE`.
    MigrateSlot,
    /// Another client's `force_unlock` (on every master of a `RedLock`) while a worker
    /// holds the lock: the key leaves Redis under a valid guard, and a waiter is woken and
    /// may take the lock before the holder can know. The holder must be told at its next
    /// renewal, or at once when it re-enters first.
    ForceUnlock,
}

impl FaultKind {
    /// Its name in the summary.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::PauseHolder => "pause_holder",
            FaultKind::KillHolder => "kill_holder",
            FaultKind::RestartLockServer => "restart_lock_server",
            FaultKind::MinorityDown => "minority_down",
            FaultKind::KillPubSubConnections => "kill_pubsub_connections",
            FaultKind::KillCommandConnections => "kill_command_connections",
            FaultKind::FailoverMaster => "failover_master",
            FaultKind::MigrateSlot => "migrate_slot",
            FaultKind::ForceUnlock => "force_unlock",
        }
    }
}

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// What it was.
    pub kind: FaultKind,
    /// When it took effect.
    pub began: Micros,
    /// When it was over: the paused worker continued, the killed one was reaped, the
    /// server answered again, the connections were killed.
    pub ended: Micros,
    /// The worker it hit, for pauses and kills.
    pub worker: Option<WorkerId>,
    /// Whether it hit what it aimed at: a holder inside its section, a server with
    /// connections to kill.
    pub hit: bool,
    /// How long it certainly cut holders off from Redis: the pause of a worker, the lock
    /// server's downtime; zero for the others. Past the lease, the holders it caught
    /// inside their sections must be told they lost the lock.
    pub cut_off: Duration,
    /// Anything worth printing.
    pub detail: String,
}

/// Draws fault kinds from a shuffled deck, so that every kind comes up once per deck; a
/// kind that missed goes back into the deck.
#[derive(Debug)]
pub struct FaultSchedule {
    kinds: &'static [FaultKind],
    deck: Vec<FaultKind>,
    hits: BTreeMap<FaultKind, u32>,
}

impl FaultSchedule {
    /// A schedule over `kinds`.
    pub fn new(kinds: &'static [FaultKind]) -> FaultSchedule {
        FaultSchedule {
            kinds,
            deck: Vec::new(),
            hits: BTreeMap::new(),
        }
    }

    /// The next kind to inject.
    pub fn next(&mut self, rng: &mut StdRng) -> FaultKind {
        if self.deck.is_empty() {
            self.deck = self.kinds.to_vec();
            self.deck.shuffle(rng);
        }
        self.deck.pop().expect("a refilled deck has every kind")
    }

    /// Records how an injection of `kind` went (`None`: nothing to aim at was found).
    pub fn record(&mut self, kind: FaultKind, fault: Option<&Fault>) {
        if fault.is_some_and(|f| f.hit) {
            *self.hits.entry(kind).or_default() += 1;
        } else {
            self.deck.push(kind);
        }
    }

    /// Whether every kind has hit at least once.
    pub fn every_kind_hit(&self) -> bool {
        self.kinds.iter().all(|k| self.hits.contains_key(k))
    }
}

/// What faults act on.
pub struct Target<'a> {
    /// The workers.
    pub fleet: &'a mut Fleet,
    /// The stand-alone lock servers (none in `cluster` mode).
    pub lock_servers: &'a mut [RedisServer],
    /// The lock cluster, in `cluster` mode.
    pub cluster: Option<&'a RedisCluster>,
    /// How long a paused holder stays stopped: at random in this range.
    pub pauses: (Duration, Duration),
    /// How long a crashed lock server stays down: at random in this range.
    pub outages: (Duration, Duration),
    /// How many lock servers may be down with the lock still held.
    pub tolerated_down: usize,
    /// What a worker is started with: the mode, the lock servers and the timing, for the
    /// coordinator's own client.
    pub spec: &'a WorkerSpec,
}

/// How long to wait for some worker to be inside its section before giving up on a fault
/// that needs a holder.
const HOLDER_WAIT: Duration = Duration::from_secs(5);

/// Injects one fault of `kind`; `None` when it needs a holder and none showed up.
pub fn inject(kind: FaultKind, target: &mut Target<'_>, rng: &mut StdRng) -> Option<Fault> {
    match kind {
        FaultKind::PauseHolder => pause_holder(target, rng),
        FaultKind::KillHolder => kill_holder(target, rng),
        FaultKind::RestartLockServer => Some(restart_lock_servers(kind, 1, target, rng)),
        FaultKind::MinorityDown => {
            let down = target.tolerated_down.max(1);
            Some(restart_lock_servers(kind, down, target, rng))
        }
        FaultKind::KillPubSubConnections => Some(kill_connections(kind, "pubsub", target, rng)),
        FaultKind::KillCommandConnections => Some(kill_connections(kind, "normal", target, rng)),
        FaultKind::FailoverMaster => Some(failover_master(cluster_of(target))),
        FaultKind::MigrateSlot => Some(migrate_slot(cluster_of(target), rng)),
        FaultKind::ForceUnlock => force_unlock(target, rng),
    }
}

fn cluster_of<'a>(target: &Target<'a>) -> &'a RedisCluster {
    target
        .cluster
        .expect("cluster faults are drawn in cluster mode only")
}

/// Runs one of the harness's cluster operations, which are async, from the coordinator's
/// plain thread.
fn block_on<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for a cluster fault")
        .block_on(work)
}

/// A manual failover of the lock's master: its replica takes over once it has caught up,
/// so the lock, its lease and the token counter all survive it.
fn failover_master(cluster: &RedisCluster) -> Fault {
    let master = cluster.master_of_key(LOCK_NAME);
    let began = clock::now();
    let promoted = block_on(cluster.failover(master)).port();
    Fault {
        kind: FaultKind::FailoverMaster,
        began,
        ended: clock::now(),
        worker: None,
        hit: true,
        cut_off: Duration::ZERO,
        detail: format!(
            "the lock's master {} failed over to {promoted}",
            master.port()
        ),
    }
}

/// Moves the lock's slot, with its keys, to another master chosen at random.
fn migrate_slot(cluster: &RedisCluster, rng: &mut StdRng) -> Fault {
    let slot = key_slot(LOCK_NAME.as_bytes());
    let from = cluster.node_for_slot(slot);
    let others: Vec<&RedisServer> = cluster
        .masters()
        .into_iter()
        .filter(|m| m.port() != from.port())
        .collect();
    let to = others[rng.random_range(0..others.len())];
    let began = clock::now();
    block_on(cluster.migrate_slot(slot, from, to));
    Fault {
        kind: FaultKind::MigrateSlot,
        began,
        ended: clock::now(),
        worker: None,
        hit: true,
        cut_off: Duration::ZERO,
        detail: format!("slot {slot} moved from {} to {}", from.port(), to.port()),
    }
}

/// Deletes the lock under a fresh holder with the library's `force_unlock`, from a client
/// of the coordinator's own (on every master of a `RedLock`).
fn force_unlock(target: &mut Target<'_>, rng: &mut StdRng) -> Option<Fault> {
    struct ForceUnlock;
    impl BackendJob for ForceUnlock {
        type Output = redis_rlock::Result<bool>;
        async fn run<B: LockBackend>(self, backend: B) -> redis_rlock::Result<bool> {
            backend.force_unlock().await
        }
    }
    let worker = pick_holder(target.fleet, rng)?;
    let spec = target.spec;
    let began = clock::now();
    let deleted = block_on(with_backend(
        spec.mode,
        &spec.lock_urls,
        &spec.timing,
        ForceUnlock,
    ));
    let ended = clock::now();
    let deleted = matches!(deleted, Ok(Ok(true)));
    let hit = deleted
        && target
            .fleet
            .with_live(|live| in_section_at(&live.events, worker, began).is_some());
    Some(Fault {
        kind: FaultKind::ForceUnlock,
        began,
        ended,
        worker: Some(worker),
        hit,
        cut_off: Duration::ZERO,
        detail: format!("the lock force-unlocked under worker {worker} (deleted: {deleted})"),
    })
}

/// A worker that has just entered its critical section: waiting for a fresh acquire
/// leaves the most of the section for the signal to land in (a section lasts about a
/// tenth of a second). Falls back to any holder.
fn pick_holder(fleet: &Fleet, rng: &mut StdRng) -> Option<WorkerId> {
    let asked = clock::now();
    let fresh = |live: &Live| -> Vec<WorkerId> {
        live.holders()
            .into_iter()
            .filter(|&(_, since)| since >= asked)
            .map(|(worker, _)| worker)
            .collect()
    };
    fleet.wait_until(HOLDER_WAIT, |live| !fresh(live).is_empty());
    let mut holders = fleet.with_live(fresh);
    if holders.is_empty() {
        holders = fleet.with_live(|live| live.holders().into_iter().map(|(w, _)| w).collect());
    }
    holders
        .get(rng.random_range(0..holders.len().max(1)))
        .copied()
}

fn pause_holder(target: &mut Target<'_>, rng: &mut StdRng) -> Option<Fault> {
    let worker = pick_holder(target.fleet, rng)?;
    let pid = target.fleet.pid(worker)?;
    let pause = rng.random_range(target.pauses.0..=target.pauses.1);
    let safety_net = ThawSafetyNet::arm(pid, pause + Duration::from_secs(5));
    signal(pid, "-STOP");
    // Taken after the signal: from here on the worker reports nothing until it continues.
    let began = clock::now();
    std::thread::sleep(pause);
    let ended = clock::now();
    signal(pid, "-CONT");
    drop(safety_net);
    // Everything it printed before `began` was read long ago.
    let hit = target
        .fleet
        .with_live(|live| in_section_at(&live.events, worker, began).is_some());
    Some(Fault {
        kind: FaultKind::PauseHolder,
        began,
        ended,
        worker: Some(worker),
        hit,
        cut_off: clock::duration(ended - began),
        detail: format!("worker {worker} stopped for {} ms", pause.as_millis()),
    })
}

fn kill_holder(target: &mut Target<'_>, rng: &mut StdRng) -> Option<Fault> {
    let worker = pick_holder(target.fleet, rng)?;
    let began = clock::now();
    let killed_at = target.fleet.kill(worker, Duration::from_secs(10));
    let hit = target
        .fleet
        .with_live(|live| in_section_at(&live.events, worker, killed_at).is_some());
    let replacement = target.fleet.spawn();
    Some(Fault {
        kind: FaultKind::KillHolder,
        began,
        ended: killed_at,
        worker: Some(worker),
        hit,
        cut_off: Duration::ZERO,
        detail: format!("worker {worker} killed, worker {replacement} started"),
    })
}

/// Crashes `count` lock servers chosen at random, leaves them down, and restarts them on
/// their data. Holders are cut off only when more servers are down than the lock
/// tolerates (a single server; a majority of masters).
fn restart_lock_servers(
    kind: FaultKind,
    count: usize,
    target: &mut Target<'_>,
    rng: &mut StdRng,
) -> Fault {
    let mut indexes: Vec<usize> = (0..target.lock_servers.len()).collect();
    indexes.shuffle(rng);
    indexes.truncate(count);
    indexes.sort_unstable();
    let downtime = rng.random_range(target.outages.0..=target.outages.1);
    for &index in &indexes {
        target.lock_servers[index].kill();
    }
    let began = clock::now();
    std::thread::sleep(downtime);
    for &index in &indexes {
        target.lock_servers[index].restart_keeping_data();
    }
    let cuts_off = count > target.tolerated_down;
    Fault {
        kind,
        began,
        ended: clock::now(),
        worker: None,
        hit: true,
        cut_off: if cuts_off { downtime } else { Duration::ZERO },
        detail: format!(
            "lock server(s) {indexes:?} down for {} ms, restarted on their data",
            downtime.as_millis()
        ),
    }
}

fn kill_connections(
    kind: FaultKind,
    client_type: &str,
    target: &mut Target<'_>,
    rng: &mut StdRng,
) -> Fault {
    let kill = |server: &RedisServer| -> u32 {
        // redis-cli opens a connection of its own, and CLIENT KILL skips the caller.
        let answer = server.cli(&["CLIENT", "KILL", "TYPE", client_type]);
        answer.trim().parse().unwrap_or(0)
    };
    if let Some(cluster) = target.cluster {
        // On every node: a client's connections are spread over the cluster, and its
        // unlock listener sits on whichever seed answered.
        let began = clock::now();
        let killed: u32 = cluster.nodes().iter().map(kill).sum();
        return Fault {
            kind,
            began,
            ended: clock::now(),
            worker: None,
            hit: killed > 0,
            cut_off: Duration::ZERO,
            detail: format!("{killed} {client_type} connections killed on every cluster node"),
        };
    }
    let index = rng.random_range(0..target.lock_servers.len());
    let began = clock::now();
    let killed = kill(&target.lock_servers[index]);
    let ended = clock::now();
    Fault {
        kind,
        began,
        ended,
        worker: None,
        hit: killed > 0,
        cut_off: Duration::ZERO,
        detail: format!("{killed} {client_type} connections killed on lock server {index}"),
    }
}

/// Sends `signal` (`-STOP`, `-CONT`) to a worker. One that died meanwhile cannot be
/// signalled; its exit is reported with the others.
fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .stdin(Stdio::null())
        .status();
}

/// Sends SIGCONT to a paused worker later from a process of its own, so that a
/// coordinator that dies mid-pause (killed by a test timeout, say) leaves no worker stopped
/// forever. Disarmed on drop, once the coordinator continued the worker itself.
struct ThawSafetyNet {
    helper: Option<Child>,
}

impl ThawSafetyNet {
    fn arm(pid: u32, after: Duration) -> ThawSafetyNet {
        let helper = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "sleep {}; kill -CONT {pid}",
                after.as_secs().max(1)
            ))
            // A group of its own: the drop kills the shell and its `sleep` together, and a
            // Ctrl-C meant for the run does not cancel the thaw.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        ThawSafetyNet { helper }
    }
}

impl Drop for ThawSafetyNet {
    fn drop(&mut self) {
        if let Some(mut helper) = self.helper.take() {
            let group = format!("-{}", helper.id());
            let _ = Command::new("kill")
                .args(["-KILL", "--", &group])
                .stdin(Stdio::null())
                .status();
            let _ = helper.wait();
        }
    }
}

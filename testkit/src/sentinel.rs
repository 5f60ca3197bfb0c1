//! A throw-away Redis Sentinel set-up on loopback: one master, one replica and three
//! sentinels (quorum 2) watching them, with a forced failover and a killed master.
//!
//! The sentinels are `redis-server <conf> --sentinel` processes (no separate binary) whose
//! config file lives in their own temporary directory, because a sentinel rewrites it as it
//! learns the topology. They detect a dead master after 1 s (`down-after-milliseconds`)
//! and may retry a failover after 2 × 2 s (`failover-timeout`).
//!
//! Queries are blocking and bounded by 1 s timeouts; the waits are `async` and poll on
//! tokio's blocking pool, so a lock client's background tasks keep running meanwhile.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::servers::RedisServer;
use crate::wait::{off_runtime, poll_blocking};

/// How many sentinels must agree that the master is down before a failover.
pub const QUORUM: usize = 2;

/// How long start-up and every wait for the sentinels to agree may take. Start-up takes
/// about 2 s here (sentinels find each other through 2-second hello messages on the master).
pub const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// How often the waits look again.
const POLL: Duration = Duration::from_millis(20);

/// A master, a replica and three sentinels. Dropping it kills them all and removes their
/// directories.
pub struct RedisSentinels {
    name: String,
    /// The two data nodes, master first at start.
    nodes: Vec<RedisServer>,
    /// Index in `nodes` of the master as of start-up or the last wait that saw a new one.
    master: AtomicUsize,
    sentinels: Vec<RedisServer>,
}

impl RedisSentinels {
    /// Starts a master, its replica and three sentinels monitoring it as `master_name`.
    /// Returns once the replica is linked and every sentinel names the master, lists the
    /// replica as healthy and knows the two other sentinels.
    ///
    /// Blocking (up to twice [`SETTLE_LIMIT`]); panics if the set-up does not settle.
    pub fn start(master_name: &str) -> RedisSentinels {
        // Both with no full-sync delay: a master otherwise waits 5 s for more replicas,
        // and the replica becomes a master in a failover.
        let master = RedisServer::start_with_args(&["--repl-diskless-sync-delay", "0"]);
        let master_port = master.port().to_string();
        let replica = RedisServer::start_with_args(&[
            "--repl-diskless-sync-delay",
            "0",
            "--replicaof",
            "127.0.0.1",
            &master_port,
        ]);
        let ports = [master.port(), replica.port()];
        poll_blocking("the replica to link", SETTLE_LIMIT, POLL, || {
            linked(ports[1], ports[0])
        });
        // Port and bind come from the command line, which overrides the file; the sentinel
        // writes them into the file when it rewrites it.
        let config = format!(
            "sentinel monitor {master_name} 127.0.0.1 {master_port} {QUORUM}\n\
             sentinel down-after-milliseconds {master_name} 1000\n\
             sentinel failover-timeout {master_name} 2000\n"
        );
        let sentinels = (0..3)
            .map(|_| RedisServer::start_with_config(&config, &["--sentinel"]))
            .collect();
        let set = RedisSentinels {
            name: master_name.to_string(),
            nodes: vec![master, replica],
            master: AtomicUsize::new(0),
            sentinels,
        };
        let sentinel_ports = set.sentinel_ports();
        let name = set.name.clone();
        poll_blocking("the sentinels to settle", SETTLE_LIMIT, POLL, || {
            settled(&sentinel_ports, &name, ports[0], ports[1], true)
        });
        set
    }

    /// The name the sentinels monitor the master as.
    pub fn master_name(&self) -> &str {
        &self.name
    }

    /// `redis://127.0.0.1:PORT` of every sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The sentinel processes.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The two data nodes, the first master at start, whatever their role now.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The master as of start-up or the last [`failover`](Self::failover) or
    /// [`wait_for_master`](Self::wait_for_master); [`current_master_addr`](Self::current_master_addr)
    /// asks the sentinels.
    pub fn master(&self) -> &RedisServer {
        &self.nodes[self.master.load(Ordering::SeqCst)]
    }

    /// The other data node: the replica as of start-up or the last failover (an old master
    /// becomes a replica only when the sentinels convert it, see
    /// [`failover`](Self::failover)).
    pub fn replica(&self) -> &RedisServer {
        &self.nodes[1 - self.master.load(Ordering::SeqCst)]
    }

    /// The master's address as the first sentinel that answers names it
    /// (`SENTINEL GET-MASTER-ADDR-BY-NAME`). Blocking.
    pub fn current_master_addr(&self) -> (String, u16) {
        let mut why = String::from("no sentinel is running");
        for sentinel in self.sentinels.iter().filter(|s| s.is_running()) {
            match master_addr(sentinel.port(), &self.name) {
                Ok(addr) => return addr,
                Err(e) => why = e,
            }
        }
        panic!("no sentinel names master {}: {why}", self.name);
    }

    /// Forces a failover (`SENTINEL FAILOVER`, no agreement needed) and returns the new
    /// master once every running sentinel names it and it answers `ROLE` as a master.
    ///
    /// The old master is left as it is: the sentinels turn it into a replica of the new one
    /// only when their `INFO` (every 10 s) finds it still claiming to be a master 8 s after
    /// the switch, about 10 s later, and until then it takes writes. [`wait_until_replicated`](Self::wait_until_replicated)
    /// waits for that.
    ///
    /// # Cancel safety
    ///
    /// The failover goes ahead once asked for; the wait runs to its bound on the blocking
    /// pool even if this future is dropped.
    pub async fn failover(&self) -> &RedisServer {
        let new = self.replica().port();
        let sentinel = self
            .sentinels
            .iter()
            .find(|s| s.is_running())
            .expect("no sentinel is running");
        let reply: redis::RedisResult<()> =
            sentinel.query(redis::cmd("SENTINEL").arg("FAILOVER").arg(&self.name));
        reply.unwrap_or_else(|e| panic!("SENTINEL FAILOVER {}: {e}", self.name));
        self.wait_for_master(new).await
    }

    /// Kills (SIGKILL) the current master and returns its port. The sentinels notice after
    /// 1 s and elect a leader that promotes the replica; [`wait_for_master`](Self::wait_for_master)
    /// with the replica's port waits for that (about 2–4 s after the kill).
    pub fn kill_master(&mut self) -> u16 {
        let i = self.master.load(Ordering::SeqCst);
        self.nodes[i].kill();
        self.nodes[i].port()
    }

    /// Waits until every running sentinel names the node on `port` as the master and that
    /// node answers `ROLE` as a master; then [`master`](Self::master) returns it. Panics
    /// after [`SETTLE_LIMIT`].
    ///
    /// # Cancel safety
    ///
    /// The wait runs to its bound on the blocking pool even if this future is dropped.
    pub async fn wait_for_master(&self, port: u16) -> &RedisServer {
        let index = self
            .nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no data node listens on {port}"));
        let sentinels = self.running_sentinel_ports();
        let name = self.name.clone();
        off_runtime(move || {
            poll_blocking(
                &format!("the sentinels to name {port} master"),
                SETTLE_LIMIT,
                POLL,
                || {
                    for &sentinel in &sentinels {
                        let (_, named) = master_addr(sentinel, &name)?;
                        if named != port {
                            return Err(format!("sentinel {sentinel} names {named}"));
                        }
                    }
                    match role(port)?.as_str() {
                        "master" => Ok(()),
                        other => Err(format!("{port} answers ROLE {other}")),
                    }
                },
            )
        })
        .await;
        self.master.store(index, Ordering::SeqCst);
        &self.nodes[index]
    }

    /// Waits until the set-up is whole again after a failover: the other data node is a
    /// replica of the master with its link up, and every running sentinel lists it as a
    /// replica it can reach and knows the other running sentinels. After
    /// [`failover`](Self::failover) this is the sentinels converting the old master, about
    /// 10 s later (their `INFO` period); what they report about its link lags another 10 s,
    /// so it is not waited for. Panics after [`SETTLE_LIMIT`].
    ///
    /// # Cancel safety
    ///
    /// The wait runs to its bound on the blocking pool even if this future is dropped.
    pub async fn wait_until_replicated(&self) {
        let (master, replica) = (self.master().port(), self.replica().port());
        let sentinels = self.running_sentinel_ports();
        let name = self.name.clone();
        off_runtime(move || {
            poll_blocking("the old master to replicate", SETTLE_LIMIT, POLL, || {
                linked(replica, master)?;
                settled(&sentinels, &name, master, replica, false)
            })
        })
        .await
    }

    fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(RedisServer::port).collect()
    }

    fn running_sentinel_ports(&self) -> Vec<u16> {
        self.sentinels
            .iter()
            .filter(|s| s.is_running())
            .map(RedisServer::port)
            .collect()
    }
}

/// One query within the usual 1 s bounds, its error as text for the wait messages.
fn ask<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> Result<T, String> {
    crate::servers::query_port(port, cmd, crate::servers::QUERY_TIMEOUT)
        .map_err(|e| format!("{port}: {e}"))
}

/// `SENTINEL GET-MASTER-ADDR-BY-NAME` on one sentinel.
fn master_addr(sentinel: u16, name: &str) -> Result<(String, u16), String> {
    let (host, port): (String, u16) = ask(
        sentinel,
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(name),
    )?;
    Ok((host, port))
}

/// The first element of `ROLE`: `master`, `slave` or `sentinel`.
fn role(port: u16) -> Result<String, String> {
    let reply: Vec<redis::Value> = ask(port, &redis::cmd("ROLE"))?;
    match reply.first() {
        Some(redis::Value::BulkString(role)) => Ok(String::from_utf8_lossy(role).into_owned()),
        other => Err(format!("{port}: ROLE starts with {other:?}")),
    }
}

/// Whether `replica` replicates `master` with its link up and `master` counts it.
fn linked(replica: u16, master: u16) -> Result<(), String> {
    let info: String = ask(replica, redis::cmd("INFO").arg("replication"))?;
    let wanted = format!("master_port:{master}");
    if !info.lines().any(|l| l.trim() == wanted) {
        return Err(format!("{replica} does not replicate {master}"));
    }
    if !info.lines().any(|l| l.trim() == "master_link_status:up") {
        return Err(format!("{replica}: master link down"));
    }
    let info: String = ask(master, redis::cmd("INFO").arg("replication"))?;
    if !info.lines().any(|l| l.trim() == "connected_slaves:1") {
        return Err(format!("{master} does not count its replica yet"));
    }
    Ok(())
}

/// Whether every sentinel in `sentinels` names `master`, lists `replica` as a replica it
/// can reach (with `link_ok`, one whose link to the master was up at its last `INFO`), and
/// knows every other sentinel in `sentinels`.
fn settled(
    sentinels: &[u16],
    name: &str,
    master: u16,
    replica: u16,
    link_ok: bool,
) -> Result<(), String> {
    for &sentinel in sentinels {
        let (_, named) = master_addr(sentinel, name)?;
        if named != master {
            return Err(format!("sentinel {sentinel} names {named}, not {master}"));
        }
        let replicas: Vec<HashMap<String, String>> =
            ask(sentinel, redis::cmd("SENTINEL").arg("REPLICAS").arg(name))?;
        let healthy = replicas.iter().any(|r| {
            r.get("port").map(String::as_str) == Some(&replica.to_string())
                && (!link_ok || r.get("master-link-status").map(String::as_str) == Some("ok"))
                && r.get("flags").is_some_and(|f| {
                    f.split(',')
                        .all(|flag| !matches!(flag, "s_down" | "o_down" | "disconnected"))
                })
        });
        if !healthy {
            return Err(format!("sentinel {sentinel} lists replicas {replicas:?}"));
        }
        let known: Vec<HashMap<String, String>> =
            ask(sentinel, redis::cmd("SENTINEL").arg("SENTINELS").arg(name))?;
        for &other in sentinels.iter().filter(|&&p| p != sentinel) {
            if !known
                .iter()
                .any(|s| s.get("port").map(String::as_str) == Some(&other.to_string()))
            {
                return Err(format!(
                    "sentinel {sentinel} does not know sentinel {other}"
                ));
            }
        }
    }
    Ok(())
}

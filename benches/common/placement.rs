//! Where the client and redis-server run. This machine has 2 vCPUs and a cross-CPU wake-up
//! costs tens of µs, so every workload pins: the client (this process, every thread it
//! starts) to CPU 0, and the server to CPU 1 ("split") or to CPU 0 too ("same core").

use std::process::Command;

use crate::support::RedisServer;

/// The client's CPU, whatever the placement.
pub const CLIENT_CPU: usize = 0;

/// One placement of the server against the client.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// In JSON lines and in `PLACEMENTS`.
    pub id: &'static str,
    pub described: &'static str,
    pub server_cpu: usize,
}

/// Split (a cross-CPU wake-up in every round trip), then same core (each waits for the
/// other's turn, so the client's own work weighs more).
pub const PLACEMENTS: [Placement; 2] = [
    Placement {
        id: "cross_cpu",
        described: "server on CPU 1, client on CPU 0",
        server_cpu: 1,
    },
    Placement {
        id: "same_cpu",
        described: "client and server both on CPU 0",
        server_cpu: 0,
    },
];

/// The split placement, which every workload but W1 uses.
pub const SPLIT: Placement = PLACEMENTS[0];

/// Pins every thread of `server` (its background threads too) to `cpu`.
pub fn pin_server(server: &RedisServer, cpu: usize) -> bool {
    Command::new("taskset")
        .args(["-a", "-cp", &cpu.to_string(), &server.pid().to_string()])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Pins the calling thread to `cpu`; threads it starts afterwards (every runtime's workers
/// and blocking pool) inherit it. Call before building any runtime.
pub fn pin_this_thread(cpu: usize) -> bool {
    // SAFETY: `set` is a plain bit set, zeroed and then written through the libc helpers;
    // pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Starts a redis-server and places it: the client on [`CLIENT_CPU`], the server on
/// `placement`'s CPU. Returns the server and whether both pins took.
pub fn start(placement: Placement) -> (RedisServer, bool) {
    let server = RedisServer::start();
    let client = pin_this_thread(CLIENT_CPU);
    let pinned = pin_server(&server, placement.server_cpu) && client;
    (server, pinned)
}

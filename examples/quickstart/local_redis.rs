//! A Redis on this machine for the quickstart: the one at `127.0.0.1:6379` if it answers,
//! else a throwaway `redis-server` on a free loopback port, stopped when dropped.

use std::fmt;
use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where a developer's Redis usually listens.
const DEFAULT_ADDR: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 6379));
/// Plenty for a Redis on this machine, short enough that a newcomer without one barely
/// notices the probe.
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);
/// A fresh server answers within milliseconds; this leaves room for a busy machine.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
const STARTUP_POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Enough of the server's log to show why it did not start.
const LOG_TAIL_LINES: usize = 20;

/// A Redis that answers on a loopback address. If it is a throwaway server, dropping this
/// stops it.
pub struct LocalRedis {
    addr: SocketAddr,
    _throwaway: Option<ThrowawayServer>,
}

impl LocalRedis {
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

/// Why there is no local Redis for the demo.
#[derive(Debug)]
pub enum Unavailable {
    NotInstalled,
    StartFailed(String),
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::NotInstalled => write!(
                f,
                "No Redis answers at {DEFAULT_ADDR}, and there is no `redis-server` on PATH to \
                 start a throwaway one.\n\
                 Install Redis:\n  \
                 Debian/Ubuntu:  sudo apt-get install redis-server\n  \
                 macOS:          brew install redis\n\
                 then run this example again (it starts and stops a throwaway redis-server by \
                 itself), or start one yourself:\n  \
                 redis-server --port 6379 --save \"\"\n\
                 or point the example at a Redis you already have:\n  \
                 REDIS_URL=redis://HOST:PORT cargo run --example quickstart"
            ),
            Unavailable::StartFailed(why) => write!(
                f,
                "No Redis answers at {DEFAULT_ADDR}, and a throwaway redis-server did not \
                 start: {why}\n\
                 Start one yourself with `redis-server --port 6379 --save \"\"`, or set \
                 REDIS_URL to a Redis you have."
            ),
        }
    }
}

/// The Redis at the default address if it answers, else a throwaway server, announced in
/// one line because the user did not ask for it.
pub async fn find_or_start() -> Result<LocalRedis, Unavailable> {
    if answers_ping(DEFAULT_ADDR).await {
        return Ok(LocalRedis {
            addr: DEFAULT_ADDR,
            _throwaway: None,
        });
    }
    let server = ThrowawayServer::start().await?;
    println!(
        "no Redis at {DEFAULT_ADDR}: started a throwaway redis-server on {} (stopped on exit)",
        server.addr
    );
    Ok(LocalRedis {
        addr: server.addr,
        _throwaway: Some(server),
    })
}

/// Whether a Redis answers `PING` at `addr` within [`PROBE_TIMEOUT`]. Anything else that
/// accepts the connection (another service, a Redis that wants a password) does not count.
async fn answers_ping(addr: SocketAddr) -> bool {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(b"PING\r\n").await?;
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply).await?;
        Ok::<bool, io::Error>(&reply == b"+PONG\r\n")
    };
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, exchange).await,
        Ok(Ok(true))
    )
}

/// A `redis-server` child process that keeps nothing on disk outside its own temporary
/// directory. Dropping it kills the process and removes the directory.
struct ThrowawayServer {
    addr: SocketAddr,
    dir: PathBuf,
    process: Option<Child>,
}

impl ThrowawayServer {
    async fn start() -> Result<ThrowawayServer, Unavailable> {
        let port = free_loopback_port()
            .map_err(|e| Unavailable::StartFailed(format!("no free loopback port: {e}")))?;
        let dir = create_temp_dir(port).map_err(|e| {
            Unavailable::StartFailed(format!("could not create a temporary directory: {e}"))
        })?;
        // The guard owns the directory from here on, so every failure below removes it.
        let mut server = ThrowawayServer {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            dir,
            process: None,
        };
        server.process = Some(server.spawn()?);
        server.wait_until_ready().await?;
        Ok(server)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    fn spawn(&self) -> Result<Child, Unavailable> {
        // With no `--logfile`, Redis logs to stdout; sending stdout and stderr to one file
        // also keeps fatal errors from before its logging starts (e.g. a bad argument).
        let cannot_log =
            |e: io::Error| Unavailable::StartFailed(format!("could not create its log file: {e}"));
        let stdout = File::create(self.log_path()).map_err(cannot_log)?;
        let stderr = stdout.try_clone().map_err(cannot_log)?;
        Command::new("redis-server")
            .args(["--port", &self.addr.port().to_string()])
            .args(["--bind", "127.0.0.1"])
            // Nothing here is worth keeping, and nothing should be written outside `dir`.
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => Unavailable::NotInstalled,
                _ => Unavailable::StartFailed(format!("could not run redis-server: {e}")),
            })
    }

    async fn wait_until_ready(&mut self) -> Result<(), Unavailable> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = self.exit_status() {
                return Err(Unavailable::StartFailed(format!(
                    "it exited early ({status}). The end of its log:\n{}",
                    self.log_tail()
                )));
            }
            if answers_ping(self.addr).await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Unavailable::StartFailed(format!(
                    "it did not answer on {} within {STARTUP_TIMEOUT:?}. The end of its log:\n{}",
                    self.addr,
                    self.log_tail()
                )));
            }
            tokio::time::sleep(STARTUP_POLL_INTERVAL).await;
        }
    }

    fn exit_status(&mut self) -> Option<ExitStatus> {
        self.process.as_mut()?.try_wait().ok().flatten()
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        if lines.is_empty() {
            return "(empty)".to_string();
        }
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }
}

impl Drop for ThrowawayServer {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            // SIGKILL: the server holds nothing worth a graceful shutdown, and cannot ignore it.
            let _ = process.kill();
            // Reaped before we go on, so its port is free again by the time we exit.
            let _ = process.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port that nothing listens on right now. Another process could take it before
/// the server binds it; the server would then exit early, which `wait_until_ready` reports.
fn free_loopback_port() -> io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// A new directory under the system's temporary directory, unique to this process and port
/// (and time, in case an earlier process with the same id left one behind).
fn create_temp_dir(port: u16) -> io::Result<PathBuf> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since_epoch| since_epoch.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "redis-rlock-quickstart-{}-{port}-{nanos}",
        std::process::id()
    ));
    // `create_dir`, not `create_dir_all`: a directory that already exists is not ours.
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

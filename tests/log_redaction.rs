//! A password never appears in a log line, at any level.
//!
//! Alone in its test binary: tracing caches, per call site, whether anyone listens, and a
//! test on another thread hitting a call site first can make the subscriber this test
//! installs miss it.

use std::io::Write;
use std::sync::{Arc, Mutex};

use redis_rlock::Client;
use testkit::RedisServer;

const SECRET: &str = "s3cret-Pa55word";

/// Where the test's log lines go.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn log_lines_never_carry_the_password() {
    let server = RedisServer::start();
    let set = format!(">{SECRET}");
    server.cli(&["ACL", "SETUSER", "app", "on", &set, "~*", "&*", "+@all"]);
    let url_of = |server: &RedisServer| format!("redis://app:{SECRET}@127.0.0.1:{}", server.port());
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    // Everything on this thread, background tasks included: a current-thread runtime.
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let client = Client::builder(url_of(&server))
                .watchdog_timeout(std::time::Duration::from_millis(300))
                .build()
                .await
                .unwrap();
            let guard = client.lock("order:1").lock().await.unwrap();
            // A renewal round and a waiter's subscription log too.
            let waiter = client.lock("order:1");
            let waiting = tokio::spawn(async move { waiter.lock().await.map(drop) });
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            // The waiter's pub/sub connection, lost and made again, logs its node.
            server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]);
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            guard.unlock().await.unwrap();
            waiting.await.unwrap().unwrap();
            let report = client.shutdown(std::time::Duration::from_secs(5)).await;
            assert!(report.is_complete(), "{report:?}");
            let wrong = format!("redis://app:{SECRET}x@127.0.0.1:{}", server.port());
            Client::connect(wrong.as_str()).await.unwrap_err();
        });
    });
    let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("connected"),
        "the connect line is logged:\n{logged}"
    );
    assert!(
        logged.contains("app:***@"),
        "the URL is logged redacted:\n{logged}"
    );
    assert!(
        logged.contains(&format!("node=127.0.0.1:{}", server.port())),
        "pub/sub lines name the node by its address:\n{logged}"
    );
    assert!(!logged.contains("node=the server"), "{logged}");
    assert!(
        logged.contains("shut down"),
        "the shutdown is logged:\n{logged}"
    );
    assert!(!logged.contains(SECRET), "{logged}");
}

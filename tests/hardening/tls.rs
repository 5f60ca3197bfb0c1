//! TLS: the test harness's TLS server (checked with raw redis-rs), then locks over
//! `rediss://`: custom roots, mutual TLS, `#insecure`, and refused or malformed roots.
//! Redis is inspected through the server's plain port.
#![cfg(feature = "tls")]

use std::time::{Duration, Instant};

use testkit::tls::{generous_config, TlsRedis};

/// Bound for anything that must finish but may be slow on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(10);

/// Connects with `certs` to `url` and sends `PING`, all within [`GENEROUS`]; a timeout
/// comes back as `Err` too.
async fn tls_ping(url: &str, certs: redis::TlsCertificates) -> Result<String, String> {
    let attempt = async {
        let client = redis::Client::build_with_tls(url, certs)?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&generous_config())
            .await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    match tokio::time::timeout(GENEROUS, attempt).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {GENEROUS:?}")),
    }
}

/// Connections the server has open on its TLS port, from `CLIENT LIST` (plain port).
fn tls_connections(server: &TlsRedis) -> Vec<String> {
    let laddr = format!("laddr=127.0.0.1:{} ", server.tls_port());
    server
        .cli(&["CLIENT", "LIST"])
        .lines()
        .filter(|line| line.contains(&laddr))
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------------------
// The harness: a TLS port next to the plain one, with a test PKI.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn harness_serves_tls_to_a_client_trusting_the_test_ca() {
    let server = TlsRedis::start(false);
    assert_ne!(server.tls_port(), server.port());
    assert_eq!(
        server.cli(&["CONFIG", "GET", "tls-port"]),
        format!("tls-port\n{}", server.tls_port())
    );

    // Both certificate names: the IP SAN and the DNS SAN (sent as SNI).
    for url in [server.tls_url(), server.tls_url_localhost()] {
        let pong = tls_ping(&url, server.pki().trust_ca()).await;
        assert_eq!(pong.as_deref(), Ok("PONG"), "{url}");
    }

    // One Redis behind both ports: a write over TLS is read on the plain port.
    let mut tls = server.raw_tls(false).await;
    let () = redis::cmd("SET")
        .arg("written-over-tls")
        .arg("yes")
        .query_async(&mut tls)
        .await
        .unwrap();
    let value: String = redis::cmd("GET")
        .arg("written-over-tls")
        .query_async(&mut server.raw().await)
        .await
        .unwrap();
    assert_eq!(value, "yes");
    assert!(
        !tls_connections(&server).is_empty(),
        "CLIENT LIST shows the TLS connection"
    );
}

#[tokio::test]
async fn harness_mutual_tls_needs_the_client_certificate() {
    let server = TlsRedis::start(true);
    let started = Instant::now();
    let refused = tls_ping(&server.tls_url(), server.pki().trust_ca()).await;
    println!(
        "without a client certificate, after {:?}: {refused:?}",
        started.elapsed()
    );
    assert!(refused.is_err(), "no client certificate, got {refused:?}");

    let pong = tls_ping(&server.tls_url(), server.pki().trust_ca_with_client_cert()).await;
    assert_eq!(pong.as_deref(), Ok("PONG"));
    let mut conn = server.raw_tls(true).await;
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
}

#[tokio::test]
async fn harness_server_is_refused_by_a_client_trusting_another_ca() {
    let server = TlsRedis::start(false);
    let certs = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(server.pki().other_ca_pem.clone()),
    };
    let started = Instant::now();
    let refused = tls_ping(&server.tls_url(), certs).await;
    println!(
        "trusting another CA, after {:?}: {refused:?}",
        started.elapsed()
    );
    let err = refused.expect_err("a server signed by an untrusted CA");
    assert!(
        err.to_lowercase().contains("certificate"),
        "the error names the certificate: {err}"
    );
}

#[tokio::test]
async fn harness_accepts_any_certificate_with_the_insecure_fragment() {
    let server = TlsRedis::start(false);
    let certs = redis::TlsCertificates {
        client_tls: None,
        root_cert: None,
    };
    let pong = tls_ping(&server.tls_url_insecure(), certs).await;
    assert_eq!(pong.as_deref(), Ok("PONG"));
}

#[tokio::test]
async fn harness_tls_port_does_not_speak_plain_resp() {
    let server = TlsRedis::start(false);
    let url = format!("redis://127.0.0.1:{}", server.tls_port());
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    let started = Instant::now();
    let attempt = async {
        let client = redis::Client::open(url.as_str())?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    let outcome = tokio::time::timeout(GENEROUS, attempt).await;
    println!(
        "plain RESP on the TLS port, after {:?}: {outcome:?}",
        started.elapsed()
    );
    assert!(
        !matches!(outcome, Ok(Ok(_))),
        "plain RESP on the TLS port answered: {outcome:?}"
    );
}

#[tokio::test]
async fn harness_restart_keeps_tls_and_drop_removes_the_pki() {
    let mut server = TlsRedis::start(false);
    let tls_port = server.tls_port();
    server.restart();
    assert_eq!(server.tls_port(), tls_port);
    let pong = tls_ping(&server.tls_url(), server.pki().trust_ca()).await;
    assert_eq!(pong.as_deref(), Ok("PONG"), "TLS after a restart");

    let ca_file = server.pki().ca_file.clone();
    assert!(ca_file.exists());
    drop(server);
    assert!(!ca_file.exists(), "{ca_file:?} removed on drop");
    assert!(!ca_file.parent().unwrap().exists());
}

// ---------------------------------------------------------------------------------------
// The library over TLS.
// ---------------------------------------------------------------------------------------

mod library {
    use std::collections::HashMap;
    use std::time::{Duration, Instant};

    use super::{tls_connections, GENEROUS};
    use testkit::tls::TlsRedis;
    use testkit::{info_field, lock_hash, pttl, settles_to, Waiting};

    /// A client of `server`'s TLS port that trusts the test CA.
    async fn tls_client(server: &TlsRedis, watchdog: Duration) -> redis_rlock::Client {
        redis_rlock::Client::builder(server.tls_url())
            .tls_root_certificate(server.pki().ca_pem.clone())
            .watchdog_timeout(watchdog)
            .build()
            .await
            .expect("connect to the test redis-server over TLS")
    }

    /// `build()`s `builder` within [`GENEROUS`] (panics if it hangs) and returns the error
    /// it must fail with, printed to the test output.
    async fn build_fails(what: &str, builder: redis_rlock::ClientBuilder) -> redis_rlock::Error {
        let started = Instant::now();
        let result = tokio::time::timeout(GENEROUS, builder.build())
            .await
            .unwrap_or_else(|_| panic!("{what}: build() still running after {GENEROUS:?}"));
        let err = result.expect_err(what);
        println!("{what}, after {:?}: {err}", started.elapsed());
        err
    }

    #[tokio::test]
    async fn a_lock_over_rediss_with_a_custom_root_certificate() {
        let server = TlsRedis::start(false);
        let client = tls_client(&server, Duration::from_secs(30)).await;
        let mut raw = server.raw().await;

        let guard = client.lock("tls-lock").lock().await.unwrap();
        assert!(guard.owner().starts_with(&client.id().to_string()));
        assert_eq!(
            lock_hash(&mut raw, "tls-lock").await,
            HashMap::from([(guard.owner().to_string(), 1)])
        );
        let ttl = pttl(&mut raw, "tls-lock").await;
        assert!(ttl > 0 && ttl <= 30_000, "watchdog lease, got pttl {ttl}");
        assert!(
            !tls_connections(&server).is_empty(),
            "the client talks to the TLS port"
        );

        guard.unlock().await.unwrap();
        assert_eq!(pttl(&mut raw, "tls-lock").await, -2);
        assert!(lock_hash(&mut raw, "tls-lock").await.is_empty());
    }

    #[tokio::test]
    async fn a_waiter_is_woken_by_the_unlock_message_over_tls() {
        let server = TlsRedis::start(false);
        let holder = tls_client(&server, Duration::from_secs(30)).await;
        let waiter = tls_client(&server, Duration::from_secs(30)).await;
        let mut raw = server.raw().await;

        let held = holder.lock("tls-wake").lock().await.unwrap();
        let lock = waiter.lock("tls-wake");
        let waiting = Waiting::listening(&waiter, 1, async move {
            lock.lock().await.expect("the waiter got the lock")
        })
        .await;
        // The client counted the channel once Redis confirmed it; Redis shows it too, on the
        // pub/sub connection that went through the TLS handshake.
        let channel = "redisson_lock__channel:{tls-wake}";
        let numsub = settles_to(format!("{channel}\n1"), GENEROUS, || async {
            server.cli(&["PUBSUB", "NUMSUB", channel])
        })
        .await;
        assert_eq!(numsub, format!("{channel}\n1"));
        // The subscription is on the TLS port too.
        assert!(
            tls_connections(&server)
                .iter()
                .any(|line| line.contains(" sub=1 ")),
            "a subscriber connection on the TLS port: {:?}",
            tls_connections(&server)
        );

        let woken = waiting
            .woken_by(async { held.unlock().await.unwrap() })
            .await;
        let (delay, guard) = (woken.after, woken.value);
        assert!(
            delay <= Duration::from_millis(500),
            "woken by pub/sub, not the 30 s lease: took {delay:?}"
        );
        assert_eq!(
            lock_hash(&mut raw, "tls-wake").await,
            HashMap::from([(guard.owner().to_string(), 1)])
        );
        guard.unlock().await.unwrap();
        assert_eq!(pttl(&mut raw, "tls-wake").await, -2);
    }

    #[tokio::test]
    async fn the_watchdog_renews_over_tls() {
        let server = TlsRedis::start(false);
        // A lease roomy enough that a loaded machine's late renewal round does not lose it.
        let client = tls_client(&server, Duration::from_millis(1_500)).await;
        let mut raw = server.raw().await;

        let guard = client.lock("tls-watchdog").lock().await.unwrap();
        // Two leases: only renewals keep it.
        tokio::select! {
            reason = guard.lost() => panic!("lost the lock while holding it: {reason}"),
            _ = tokio::time::sleep(Duration::from_millis(3_000)) => {}
        }
        let ttl = pttl(&mut raw, "tls-watchdog").await;
        assert!(ttl > 0 && ttl <= 1_500, "renewed lease, got pttl {ttl}");
        assert!(!guard.is_lost());
        assert_eq!(
            lock_hash(&mut raw, "tls-watchdog").await,
            HashMap::from([(guard.owner().to_string(), 1)])
        );

        guard.unlock().await.unwrap();
        assert_eq!(pttl(&mut raw, "tls-watchdog").await, -2);
    }

    #[tokio::test]
    async fn mutual_tls_needs_the_client_certificate() {
        let server = TlsRedis::start(true);
        let pki = server.pki();

        let started = Instant::now();
        build_fails(
            "no client certificate",
            redis_rlock::Client::builder(server.tls_url()).tls_root_certificate(pki.ca_pem.clone()),
        )
        .await;
        assert!(started.elapsed() < GENEROUS);

        let client = redis_rlock::Client::builder(server.tls_url())
            .tls_root_certificate(pki.ca_pem.clone())
            .tls_client_certificate(pki.client_cert_pem.clone(), pki.client_key_pem.clone())
            .build()
            .await
            .expect("connect with the client certificate");
        let mut raw = server.raw().await;
        let guard = client.lock("tls-mutual").lock().await.unwrap();
        assert_eq!(
            lock_hash(&mut raw, "tls-mutual").await,
            HashMap::from([(guard.owner().to_string(), 1)])
        );
        guard.unlock().await.unwrap();
        assert_eq!(pttl(&mut raw, "tls-mutual").await, -2);
    }

    #[tokio::test]
    async fn the_insecure_fragment_accepts_any_certificate() {
        let server = TlsRedis::start(false);
        let client = redis_rlock::Client::builder(server.tls_url_insecure())
            .build()
            .await
            .expect("connect with #insecure and no root certificate");
        let mut raw = server.raw().await;
        let guard = client
            .lock("tls-insecure")
            .try_lock()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            lock_hash(&mut raw, "tls-insecure").await,
            HashMap::from([(guard.owner().to_string(), 1)])
        );
        guard.unlock().await.unwrap();
        assert_eq!(pttl(&mut raw, "tls-insecure").await, -2);
    }

    #[tokio::test]
    async fn a_root_that_did_not_sign_the_server_is_refused() {
        let server = TlsRedis::start(false);
        let started = Instant::now();
        let err = build_fails(
            "trusting an unrelated CA",
            redis_rlock::Client::builder(server.tls_url())
                .tls_root_certificate(server.pki().other_ca_pem.clone()),
        )
        .await;
        assert!(started.elapsed() < GENEROUS);
        assert!(!err.is_invalid_argument(), "a well-formed root: {err}");
        let message = err.to_string().to_lowercase();
        assert!(
            ["certificate", "tls", "issuer", "trust"]
                .iter()
                .any(|word| message.contains(word)),
            "the error says the server was not trusted: {err}"
        );

        // Nothing was taken while refused.
        assert_eq!(server.cli(&["DBSIZE"]), "0");
    }

    #[tokio::test]
    async fn a_root_certificate_that_is_not_pem_is_an_invalid_argument() {
        let server = TlsRedis::start(false);
        // The `INFO` below opens one connection itself: anything more is the client's.
        let connections =
            |server: &TlsRedis| info_field(server, "stats", "total_connections_received", "");
        let before = connections(&server);

        let err = build_fails(
            "a root certificate that is not PEM",
            redis_rlock::Client::builder(server.tls_url())
                .tls_root_certificate(b"definitely not a certificate".to_vec()),
        )
        .await;
        assert!(err.is_invalid_argument(), "got {err:?}");
        assert_eq!(
            connections(&server),
            before + 1,
            "nothing was sent to Redis"
        );
    }

    #[tokio::test]
    async fn try_lock_for_and_a_fixed_lease_work_over_tls() {
        let server = TlsRedis::start(false);
        let client = tls_client(&server, Duration::from_secs(30)).await;
        let mut raw = server.raw().await;

        let leased = client
            .lock("tls-lease")
            .lock_with_lease(Duration::from_secs(20))
            .await
            .unwrap();
        let ttl = pttl(&mut raw, "tls-lease").await;
        assert!(
            ttl > 10_000 && ttl <= 20_000,
            "the fixed lease, got pttl {ttl}"
        );

        let other = tls_client(&server, Duration::from_secs(30)).await;
        let refused = other
            .lock("tls-lease")
            .try_lock_for(Duration::from_millis(200))
            .await
            .unwrap();
        assert!(refused.is_none(), "the lock is held by another client");

        leased.unlock().await.unwrap();
        let taken = other
            .lock("tls-lease")
            .try_lock_for(GENEROUS)
            .await
            .unwrap()
            .expect("free after the unlock");
        taken.unlock().await.unwrap();
        assert_eq!(pttl(&mut raw, "tls-lease").await, -2);
    }
}

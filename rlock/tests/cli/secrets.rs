//! Connecting: ACL users, a key prefix, TLS with client certificates, exit code 3, and
//! passwords that are never printed, in output or in errors.

use crate::support::{java_lock, listed, rlock, rlock_env};
use testkit::RedisServer;

const SECRET: &str = "hunter2-very-secret";

#[tokio::test]
async fn passwords_never_appear_and_unreachable_servers_exit_3() {
    let server = RedisServer::start();
    server.cli(&[
        "ACL",
        "SETUSER",
        "inspector",
        "on",
        &format!(">{SECRET}"),
        "~*",
        "&*",
        "+@all",
    ]);
    let url = format!("redis://inspector:{SECRET}@127.0.0.1:{}", server.port());
    let mut raw = server.raw().await;
    java_lock(&mut raw, "guarded", 1, 1, None).await;

    let run = rlock(&["--url", &url, "list", "--json"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(listed(&run.json(), "guarded"));
    // The fix commands of `leaks` name the user and ask for the password.
    let leaks = rlock(&["--url", &url, "leaks"]).await;
    assert_eq!(leaks.code, 1, "{leaks:?}");
    assert!(leaks.stdout.contains("inspector:***@"), "{}", leaks.stdout);
    assert!(
        leaks.stdout.contains("--user inspector --askpass"),
        "{}",
        leaks.stdout
    );
    // From the environment too.
    let env = rlock_env(&["list"], &[("REDIS_URL", &url)]).await;
    assert_eq!(env.code, 0, "{env:?}");

    let wrong = format!(
        "redis://inspector:{SECRET}-wrong@127.0.0.1:{}",
        server.port()
    );
    let closed = format!("redis://inspector:{SECRET}@127.0.0.1:1");
    let runs = [
        (leaks, 1),
        (rlock(&["--url", &wrong, "list"]).await, 3),
        (rlock(&["--url", &closed, "show", "x"]).await, 3),
        (rlock_env(&["leaks"], &[("REDIS_URL", &closed)]).await, 3),
        (rlock(&["--url", &closed, "unlock", "x", "--yes"]).await, 3),
        (rlock(&["--url", &url, "list", "--bogus"]).await, 2),
        (rlock(&["list", &url]).await, 2),
        (rlock(&["--cluster", &closed, "list"]).await, 3),
        (
            rlock(&["--sentinel", &closed, "--master", "m", "list"]).await,
            3,
        ),
        (
            rlock(&["--url", "redis://u:%68unter2-very-secret@[bad", "list"]).await,
            2,
        ),
    ];
    for (run, code) in &runs {
        assert_eq!(run.code, *code, "{run:?}");
        assert!(
            !run.all().contains(SECRET),
            "a password was printed: {run:?}"
        );
        assert!(
            !run.all().contains("hunter2"),
            "a password was printed: {run:?}"
        );
    }
    assert!(
        runs[1].0.stderr.contains("authentication"),
        "{:?}",
        runs[1].0
    );
}

#[tokio::test]
async fn a_key_prefix_scopes_the_keys_and_names_print_without_it() {
    let server = RedisServer::start();
    let url = server.url();
    let client = redis_rlock::Client::builder(url.as_str())
        .key_prefix("billing:")
        .build()
        .await
        .unwrap();
    let guard = client.fair_lock("invoice:9").lock().await.unwrap();
    let mut raw = server.raw().await;
    java_lock(&mut raw, "other-app", 1, 1, Some(30_000)).await;

    let listing = rlock(&["--url", &url, "--key-prefix", "billing:", "list", "--json"])
        .await
        .json();
    assert_eq!(listing["total"], 1, "{listing:#}");
    let invoice = crate::support::lock(&listing, "invoice:9");
    assert_eq!(invoice["key"], "billing:invoice:9");
    let run = rlock_env(
        &["show", "invoice:9", "--json"],
        &[("REDIS_URL", &url), ("RLOCK_KEY_PREFIX", "billing:")],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let run = rlock(&[
        "--url",
        &url,
        "--key-prefix",
        "billing:",
        "unlock",
        "invoice:9",
        "--yes",
    ])
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(server.cli(&["EXISTS", "billing:invoice:9"]), "0");
    drop(guard);
}

#[tokio::test]
async fn mutual_tls_with_the_given_files() {
    let server = testkit::tls::TlsRedis::start(true);
    let dir = std::env::temp_dir().join(format!("rlock-test-tls-{}", server.tls_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("client.pem"), dir.join("client.key"));
    std::fs::write(&cert, &server.pki().client_cert_pem).unwrap();
    std::fs::write(&key, &server.pki().client_key_pem).unwrap();
    let ca = server.pki().ca_file.to_str().unwrap().to_string();
    let (cert, key) = (
        cert.to_str().unwrap().to_string(),
        key.to_str().unwrap().to_string(),
    );
    let mut raw = server.raw().await;
    java_lock(&mut raw, "secure", 4, 1, Some(30_000)).await;

    let tls_url = server.tls_url();
    let tls = [
        "--url",
        &tls_url,
        "--tls-ca",
        &ca,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ];
    let run = rlock(&[&tls[..], &["list", "--json"]].concat()).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(listed(&run.json(), "secure"));
    let run = rlock(&[&tls[..], &["unlock", "secure", "--yes"]].concat()).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(server.cli(&["EXISTS", "secure"]), "0");
    // Without the client certificate the server refuses the handshake; TLS files for a
    // plain URL are a usage error.
    let refused = rlock(&["--url", &tls_url, "--tls-ca", &ca, "list"]).await;
    assert_eq!(refused.code, 3, "{refused:?}");
    let plain = rlock(&["--url", &server.url(), "--tls-ca", &ca, "list"]).await;
    assert_eq!(plain.code, 2, "{plain:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The commands of the read-only rules the README gives an inspecting ACL user.
fn reader_rules() -> Vec<String> {
    crate::keyspace::readme_inspector_rules()
        .into_iter()
        .filter(|rule| rule.starts_with('+'))
        .collect()
}

#[tokio::test]
async fn a_read_only_user_with_the_documented_rules_inspects_and_a_missing_rule_is_named() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    java_lock(&mut raw, "app:held", 3, 1, None).await;
    let set_user = |name: &str, rules: &[String]| {
        let mut args = vec![
            "ACL",
            "SETUSER",
            name,
            "on",
            ">reader-pw",
            "~app:*",
            "~redisson_*",
            "~redis_rlock_wait*",
            "-@all",
        ];
        args.extend(rules.iter().map(String::as_str));
        assert_eq!(server.cli(&args), "OK");
    };
    set_user("reader", &reader_rules());
    let url = format!("redis://reader:reader-pw@127.0.0.1:{}", server.port());
    for command in [
        &["list"][..],
        &["show", "app:held"],
        &["watch", "--iterations", "1"],
    ] {
        let run = rlock(&[&["--url", url.as_str()][..], command].concat()).await;
        assert_eq!(run.code, 0, "{command:?}: {run:?}");
    }
    let leaks = rlock(&["--url", &url, "leaks", "--json"]).await;
    assert_eq!(leaks.code, 1, "{leaks:?}");
    assert_eq!(leaks.json()["leaks"][0]["name"], "app:held");

    let without: Vec<String> = reader_rules()
        .into_iter()
        .filter(|r| r != "+zcount")
        .collect();
    set_user("partial", &without);
    let url = format!("redis://partial:reader-pw@127.0.0.1:{}", server.port());
    let run = rlock(&["--url", &url, "list"]).await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("NOPERM"), "{run:?}");
}

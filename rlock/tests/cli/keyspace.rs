//! A real, messy keyspace: keys that are not UTF-8, a large number of hashes that are not
//! locks, names made of escape sequences and newlines, a lock named like a flag; and the
//! inspector's own ACL rules, read from the README.

use crate::support::{java_lock, listed, lock, rlock, rlock_in_memory, JAVA_CLIENT};
use testkit::RedisServer;

/// Writes a Redisson-layout lock without TTL under a binary name.
async fn binary_lock(raw: &mut redis::aio::MultiplexedConnection, name: &[u8]) {
    let _: () = redis::cmd("HSET")
        .arg(name)
        .arg(format!("{JAVA_CLIENT}:9"))
        .arg(1)
        .query_async(raw)
        .await
        .unwrap();
}

#[tokio::test]
async fn keys_that_are_not_utf8_are_read_as_bytes_and_shown_escaped() {
    let server = RedisServer::start();
    let url = server.url();
    let mut raw = server.raw().await;
    // Other data under a binary key, a hash and a string; and a lock with a binary name.
    let _: () = redis::cmd("HSET")
        .arg(&b"cache:\xff\xfe"[..])
        .arg("field")
        .arg("value")
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(&b"redisson_lock_token:{\xfe}"[..])
        .arg("7")
        .query_async(&mut raw)
        .await
        .unwrap();
    binary_lock(&mut raw, b"lock:\xff").await;
    java_lock(&mut raw, "plain", 1, 1, Some(30_000)).await;

    let run = rlock(&["--url", &url, "list", "--json"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let listing = run.json();
    assert!(listed(&listing, "plain"), "{listing:#}");
    let binary = lock(&listing, r"lock:\xff");
    assert_eq!(binary["kind"], "reentrant");
    assert_eq!(binary["holders"][0]["client_id"], JAVA_CLIENT);
    // A free fenced lock whose name is not UTF-8 is found by its counter.
    assert_eq!(lock(&listing, r"\xfe")["fencing_token"], 7);
    assert_eq!(listing["total"], 3, "{listing:#}");

    let text = rlock(&["--url", &url, "list"]).await;
    assert_eq!(text.code, 0, "{text:?}");
    assert!(text.stdout.contains(r"lock:\xff"), "{}", text.stdout);

    // The binary lock has no TTL: a leak, fixed with Redis' own command (the library takes
    // names as text), its key quoted for the shell.
    let leaks = rlock(&["--url", &url, "leaks", "--json"]).await;
    assert_eq!(leaks.code, 1, "{leaks:?}");
    let report = leaks.json();
    let leak = &report["leaks"][0];
    assert_eq!(leak["name"], r"lock:\xff", "{report:#}");
    assert_eq!(
        leak["fix"],
        format!(
            r"redis-cli -h 127.0.0.1 -p {} PEXPIRE $'lock:\xff' 30000",
            server.port()
        )
    );
    // Nothing else was touched.
    assert_eq!(server.cli(&["DBSIZE"]), "4");
}

#[tokio::test]
async fn a_large_keyspace_of_other_hashes_is_walked_page_by_page() {
    const HASHES: u64 = 200_000;
    let server = RedisServer::start();
    let url = server.url();
    let mut raw = server.raw().await;
    // 200,000 plain hashes, written by the server itself, 2,000 per call: a call of
    // 20,000 outlived the connection's response timeout on a loaded machine.
    let fill = redis::Script::new(
        "for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do \
         redis.call('HSET', 'user:' .. i, 'name', 'n' .. i) end",
    );
    let started = std::time::Instant::now();
    for from in (0..HASHES).step_by(2_000) {
        let _: () = fill
            .arg(from)
            .arg(from + 1_999)
            .invoke_async(&mut raw)
            .await
            .unwrap();
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    java_lock(&mut raw, "orders:1", 1, 1, Some(60_000)).await;
    java_lock(&mut raw, "orders:2", 2, 2, None).await;
    let client = redis_rlock::Client::builder(url.as_str())
        .build()
        .await
        .unwrap();
    let _fenced = client.fenced_lock("ledger").lock().await.unwrap();

    // In 64 MB: reading the whole keyspace before any lock took 795 MB for 300,000 hashes.
    let run = rlock_in_memory(64, &["--url", &url, "list", "--json"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let listing = run.json();
    assert_eq!(listing["total"], 3, "{listing:#}");
    assert_eq!(listing["scan"]["complete"], true);
    assert_eq!(lock(&listing, "orders:2")["holders"][0]["count"], 2);
    assert_eq!(lock(&listing, "ledger")["kind"], "fenced");
    let limited = rlock(&["--url", &url, "list", "--limit", "1", "--json"]).await;
    let limited = limited.json();
    assert_eq!(limited["total"], 3);
    assert_eq!(limited["locks"][0]["name"], "ledger");
    assert_eq!(limited["truncated"], true);
    let leaks = rlock_in_memory(64, &["--url", &url, "leaks", "--json"]).await;
    assert_eq!(leaks.code, 1, "{leaks:?}");
    assert_eq!(leaks.json()["locks_examined"], 3);
}

#[tokio::test]
async fn names_are_printed_safely_and_commands_quote_them() {
    let server = RedisServer::start();
    let url = server.url();
    let mut raw = server.raw().await;
    let evil = "evil\n\u{1b}[2Jfake  reentrant  no TTL";
    java_lock(&mut raw, evil, 1, 1, None).await;

    // JSON carries the name exact.
    let listing = rlock(&["--url", &url, "list", "--json"]).await.json();
    assert!(listed(&listing, evil), "{listing:#}");

    let list = rlock(&["--url", &url, "list"]).await;
    assert_eq!(list.code, 0, "{list:?}");
    assert!(!list.stdout.contains('\u{1b}'), "{:?}", list.stdout);
    // A header and one row: the newline did not draw a row of its own.
    assert_eq!(list.stdout.lines().count(), 2, "{:?}", list.stdout);
    assert!(
        list.stdout.contains(r"evil\n\u{1b}[2Jfake"),
        "{}",
        list.stdout
    );

    let show = rlock(&["--url", &url, "show", evil]).await;
    assert_eq!(show.code, 0, "{show:?}");
    assert!(!show.all().contains('\u{1b}'), "{show:?}");
    assert!(!show.stdout.contains("evil\n"), "{show:?}");

    let leaks = rlock(&["--url", &url, "leaks"]).await;
    assert_eq!(leaks.code, 1, "{leaks:?}");
    assert!(!leaks.stdout.contains('\u{1b}'), "{:?}", leaks.stdout);
    assert!(!leaks.stdout.contains("evil\n"), "{:?}", leaks.stdout);
    let fix = r"unlock --yes -- $'evil\x0a\x1b[2Jfake  reentrant  no TTL'";
    assert!(leaks.stdout.contains(fix), "{}", leaks.stdout);
}

#[tokio::test]
async fn printed_fixes_put_names_after_a_double_dash() {
    let server = RedisServer::start();
    let url = server.url();
    let mut raw = server.raw().await;
    java_lock(&mut raw, "-h", 1, 1, None).await;

    let leaks = rlock(&["--url", &url, "leaks", "--json"]).await;
    assert_eq!(leaks.code, 1, "{leaks:?}");
    let fix = leaks.json()["leaks"][0]["fix"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(fix, format!("rlock --url {url} unlock --yes -- -h"));
    // Run as printed, by a POSIX shell, with `rlock` on the PATH.
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_rlock"));
    let path = format!(
        "{}:{}",
        binary.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&fix)
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{fix}: {output:?}");
    assert_eq!(server.cli(&["EXISTS", "-h"]), "0");
}

/// The read-only rules the README's Operations section gives `rlock`'s user: its `ACL
/// SETUSER inspector` block, word by word.
pub fn readme_inspector_rules() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("read README.md");
    let block = readme
        .split("```text\n")
        .filter_map(|rest| rest.split_once("\n```").map(|(block, _)| block))
        .find(|block| block.starts_with("ACL SETUSER inspector"))
        .expect("the README shows rlock's rules in a ```text block");
    block.split_whitespace().map(str::to_string).collect()
}

#[tokio::test]
async fn the_readme_rules_inspect_and_unlock_and_a_missing_rule_is_named() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    java_lock(&mut raw, "app:held", 3, 1, None).await;
    let rules = readme_inspector_rules();
    let set = |rules: &[String]| {
        server.cli(&["ACL", "DELUSER", "inspector"]);
        let args: Vec<&str> = rules.iter().map(String::as_str).collect();
        assert_eq!(server.cli(&args), "OK");
    };
    set(&rules);
    let url = format!("redis://inspector:secret@127.0.0.1:{}", server.port());
    for command in [&["list"][..], &["show", "app:held"], &["leaks"]] {
        let run = rlock(&[&["--url", url.as_str()][..], command].concat()).await;
        assert_ne!(run.code, 4, "{command:?}: {run:?}");
        assert!(run.stderr.is_empty(), "{command:?}: {run:?}");
    }
    // `unlock` with the lock user's rules added.
    let lock_user = testkit::acl::readme_rules("app:*");
    let added: Vec<&str> = lock_user[3..]
        .iter()
        .map(String::as_str)
        .filter(|rule| !matches!(*rule, "on" | "resetkeys" | "resetchannels" | "-@all"))
        .filter(|rule| !rule.starts_with('>'))
        .collect();
    assert_eq!(
        server.cli(&[&["ACL", "SETUSER", "inspector"][..], &added].concat()),
        "OK"
    );
    let run = rlock(&["--url", &url, "unlock", "--yes", "--", "app:held"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(server.cli(&["EXISTS", "app:held"]), "0");

    // Without `+scan`: the message names the rule, exit code 4.
    let without: Vec<String> = rules.into_iter().filter(|r| r != "+scan").collect();
    set(&without);
    let run = rlock(&["--url", &url, "list"]).await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "Redis refused reading `127.0.0.1:{}`: the user lacks permission to run `+scan`",
            server.port()
        )),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("README's Operations section"),
        "{run:?}"
    );
}

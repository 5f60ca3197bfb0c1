//! Redis ACL users for permission tests: the README's rules for a lock user, variations of
//! them, and what the server logged when it refused something.

use std::collections::HashMap;

use crate::servers::RedisServer;

/// The user the helpers create, and its password.
pub const USER: &str = "locker";
pub const PASSWORD: &str = "secret";

/// The README's `ACL SETUSER` arguments for a lock user whose lock names match
/// `lock_pattern` (such as `app:*`), read from the README itself so that the tests use
/// exactly what users are told: every lock kind, fenced writes and replica sync included.
pub fn readme_rules(lock_pattern: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("read README.md");
    let block = readme
        .split("```text\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("\n```").map(|(block, _)| block))
        .find(|block| block.starts_with("ACL SETUSER locker"))
        .expect("the README shows the lock user's rules in a ```text block");
    let rules: Vec<String> = block
        .split_whitespace()
        .map(|word| match word {
            "~app:*" => format!("~{lock_pattern}"),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(rules[..3], ["ACL", "SETUSER", USER]);
    assert!(rules.contains(&format!(">{PASSWORD}")));
    rules
}

/// `rules` without the rule `rule` (which must be among them).
pub fn without(rules: &[String], rule: &str) -> Vec<String> {
    assert!(
        rules.iter().any(|r| r == rule),
        "`{rule}` is not one of the rules"
    );
    rules.iter().filter(|r| *r != rule).cloned().collect()
}

/// `rules` with the rule `from` (which must be among them) replaced by `to`.
pub fn replacing(rules: &[String], from: &str, to: &str) -> Vec<String> {
    assert!(
        rules.iter().any(|r| r == from),
        "`{from}` is not one of the rules"
    );
    rules
        .iter()
        .map(|r| if r == from { to.to_string() } else { r.clone() })
        .collect()
}

/// Creates the user afresh with `rules` (as built by [`readme_rules`]), as the default
/// user, and clears the ACL log so that what it holds afterwards is this user's.
pub fn set_user(server: &RedisServer, rules: &[String]) {
    server.cli(&["ACL", "DELUSER", USER]);
    let args: Vec<&str> = rules.iter().map(String::as_str).collect();
    let reply = server.cli(&args);
    assert_eq!(reply, "OK", "ACL SETUSER refused: {reply}");
    server.cli(&["ACL", "LOG", "RESET"]);
}

/// The URL that connects as the user.
pub fn user_url(server: &RedisServer) -> String {
    format!("redis://{USER}:{PASSWORD}@127.0.0.1:{}", server.port())
}

/// What the server refused the user since [`set_user`], one entry per refusal and reason:
/// `(reason, object)`, such as `("command", "client|setinfo")` or `("key", "other:1")`.
pub async fn refusals(server: &RedisServer) -> Vec<(String, String)> {
    let entries: Vec<HashMap<String, redis::Value>> = redis::cmd("ACL")
        .arg("LOG")
        .query_async(&mut server.raw().await)
        .await
        .expect("ACL LOG");
    let text = |entry: &HashMap<String, redis::Value>, field: &str| -> String {
        entry
            .get(field)
            .and_then(|value| redis::from_redis_value_ref::<String>(value).ok())
            .unwrap_or_default()
    };
    entries
        .iter()
        .map(|entry| (text(entry, "reason"), text(entry, "object")))
        .collect()
}

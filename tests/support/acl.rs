//! Redis ACL users for permission tests: the README's rules for a lock user, variations of
//! them, and what the server logged when it refused something.

use std::collections::HashMap;

use super::RedisServer;

/// The user the helpers create, and its password.
pub const USER: &str = "locker";
pub const PASSWORD: &str = "secret";

/// The README's `ACL SETUSER` arguments for a lock user whose lock names match
/// `lock_pattern` (such as `app:*`), verbatim: every lock kind, fenced writes and replica
/// sync included.
pub fn readme_rules(lock_pattern: &str) -> Vec<String> {
    let mut rules = vec!["ACL".to_string(), "SETUSER".to_string(), USER.to_string()];
    let words = [
        "on",
        ">secret",
        "resetkeys",
        "resetchannels",
        "-@all",
        &format!("~{lock_pattern}"),
        "~redisson_unlock_latch:*",
        "~redisson_lock_queue:*",
        "~redisson_lock_timeout:*",
        "~redisson_lock_token:*",
        "~redis_rlock_fence:*",
        "&redisson_lock__channel:*",
        // Every lock kind.
        "+evalsha",
        "+script|load",
        "+ping",
        "+hello",
        "+unwatch",
        "+exists",
        "+type",
        "+hexists",
        "+hget",
        "+hincrby",
        "+hrandfield",
        "+pexpire",
        "+pttl",
        "+del",
        "+unlink",
        "+set",
        "+get",
        "+publish",
        "+subscribe",
        "+unsubscribe",
        // Fair locks.
        "+hset",
        "+lindex",
        "+lpop",
        "+rpush",
        "+linsert",
        "+lrange",
        "+lrem",
        "+zadd",
        "+zrem",
        "+zscore",
        "+zrangebyscore",
        "+pubsub|numsub",
        "+time",
        // Fenced locks.
        "+incr",
        // Replica sync only.
        "+wait",
        "+info",
    ];
    rules.extend(words.iter().map(|word| word.to_string()));
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

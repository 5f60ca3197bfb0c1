//! Redisson's key layout, read in both directions: the keys and channels of a lock from its
//! key, and the lock key back from a derived key found by a scan. The same rules as the
//! library's `protocol::names` (and Redisson's `RedissonObject.prefixName`); restated here
//! because those are crate-private, and an inspector must also read what Java clients left.

/// The waiting queue of a fair lock: a list of owner fields, head first.
pub const QUEUE: &str = "redisson_lock_queue";
/// The waiters' deadlines of a fair lock: a zset owner field → ms.
pub const TIMEOUTS: &str = "redisson_lock_timeout";
/// The fencing token counter of a fenced lock: a string, no expiry.
pub const TOKEN: &str = "redisson_lock_token";
/// One unlock request's latch: `redisson_unlock_latch:{K}:<request id>`.
pub const LATCH: &str = "redisson_unlock_latch";
/// The unlock channel; a fair waiter's own channel is this followed by `:<owner>`.
pub const CHANNEL: &str = "redisson_lock__channel";
/// The channel of a Redisson read-write lock.
pub const RW_CHANNEL: &str = "redisson_rwlock";

/// Redisson's `prefixName`: `prefix:{key}`, or `prefix:key` when the key already holds a
/// `{`, so that every derived name stays in the key's cluster slot.
pub fn derived(prefix: &str, key: &str) -> String {
    if key.contains('{') {
        format!("{prefix}:{key}")
    } else {
        format!("{prefix}:{{{key}}}")
    }
}

/// Which derived key a scanned key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DerivedKind {
    /// `redisson_lock_queue:…`
    Queue,
    /// `redisson_lock_timeout:…`
    Timeouts,
    /// `redisson_lock_token:…`
    Token,
    /// `redisson_unlock_latch:…:<id>`
    Latch,
}

/// A key found by the scan of `redisson_*` keys, read back: what it is and the lock keys it
/// may belong to, most likely first. Two: Redisson names `a` and `{a}` derive the same
/// keys, and only the lock hash that exists tells them apart. `None` for anything else.
pub fn parse_derived(scanned: &str) -> Option<(DerivedKind, Vec<String>)> {
    let (kind, rest) = [
        (DerivedKind::Queue, QUEUE),
        (DerivedKind::Timeouts, TIMEOUTS),
        (DerivedKind::Token, TOKEN),
        (DerivedKind::Latch, LATCH),
    ]
    .into_iter()
    .find_map(|(kind, prefix)| {
        let rest = scanned.strip_prefix(prefix)?.strip_prefix(':')?;
        Some((kind, rest))
    })?;
    let wrapped = if kind == DerivedKind::Latch {
        // Redisson's request ids and the library's are hex (16 random bytes).
        let (key, id) = rest.rsplit_once(':')?;
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        key
    } else {
        rest
    };
    if !wrapped.contains('{') {
        // `prefixName` always leaves a `{` in a derived name: not one of ours.
        return None;
    }
    let mut candidates = Vec::with_capacity(2);
    if let Some(inner) = wrapped.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
        if !inner.contains('{') && !inner.is_empty() {
            candidates.push(inner.to_string());
        }
    }
    candidates.push(wrapped.to_string());
    Some((kind, candidates))
}

/// A hash field naming an owner, `<client id>:<task or thread id>`: what the library and
/// Redisson write. The client id is a UUID (hex digits and dashes), the id decimal.
pub fn parse_owner(field: &str) -> Option<(&str, &str)> {
    let (client, task) = field.rsplit_once(':')?;
    let client_ok =
        !client.is_empty() && client.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    let task_ok = !task.is_empty() && task.bytes().all(|b| b.is_ascii_digit());
    (client_ok && task_ok).then_some((client, task))
}

/// `text` with Redis glob's special characters escaped, for a literal part of a `MATCH`.
pub fn glob_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Whether `text` matches the Redis glob `pattern` (`*`, `?`, `[abc]`, `[^a-z]`, `\x`), as
/// `SCAN … MATCH` does: for the keys a `MATCH` cannot select by itself (the lock names
/// inside derived keys).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    matches_from(&pattern, &text)
}

fn matches_from(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    // The last `*` seen and the text position it was tried at: the classic backtracking
    // matcher, linear in practice.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                '*' => {
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                '?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = class(pattern, p, text[t]) {
                        if matched {
                            p = next;
                            t += 1;
                            continue;
                        }
                    }
                }
                '\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == text[t] {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                c => {
                    if c == text[t] {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((star_p, star_t)) => {
                p = star_p + 1;
                t = star_t + 1;
                star = Some((star_p, star_t + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// The character class starting at `pattern[open] == '['`: whether `c` is in it, and the
/// index after its `]`. `None` for an unterminated class (then `[` is taken literally).
fn class(pattern: &[char], open: usize, c: char) -> Option<(bool, usize)> {
    let mut i = open + 1;
    let negate = pattern.get(i) == Some(&'^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    while i < pattern.len() && pattern[i] != ']' {
        if pattern[i] == '\\' && i + 1 < pattern.len() {
            matched |= pattern[i + 1] == c;
            i += 2;
        } else if i + 2 < pattern.len() && pattern[i + 1] == '-' && pattern[i + 2] != ']' {
            let (low, high) = (
                pattern[i].min(pattern[i + 2]),
                pattern[i].max(pattern[i + 2]),
            );
            matched |= low <= c && c <= high;
            i += 3;
        } else {
            matched |= pattern[i] == c;
            i += 1;
        }
    }
    if i >= pattern.len() {
        return if c == '[' {
            Some((true, open + 1))
        } else {
            None
        };
    }
    Some((matched != negate, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_follow_redisson() {
        assert_eq!(derived(QUEUE, "jobs"), "redisson_lock_queue:{jobs}");
        assert_eq!(
            derived(CHANNEL, "{u1}:cart"),
            "redisson_lock__channel:{u1}:cart"
        );
    }

    #[test]
    fn derived_keys_lead_back_to_their_lock() {
        assert_eq!(
            parse_derived("redisson_lock_queue:{jobs}"),
            Some((DerivedKind::Queue, vec!["jobs".into(), "{jobs}".into()]))
        );
        assert_eq!(
            parse_derived("redisson_unlock_latch:{order:1}:00ab"),
            Some((
                DerivedKind::Latch,
                vec!["order:1".into(), "{order:1}".into()]
            ))
        );
        assert_eq!(
            parse_derived("redisson_lock_token:{u1}:cart"),
            Some((DerivedKind::Token, vec!["{u1}:cart".into()]))
        );
        assert_eq!(parse_derived("redisson_lock_queue:plain"), None);
        assert_eq!(parse_derived("redisson_unlock_latch:{a}:zz"), None);
        assert_eq!(parse_derived("redisson_sc:{a}"), None);
    }

    #[test]
    fn owner_fields_are_uuid_and_decimal() {
        let uuid = "3f2b8c1e-1d2a-4c4b-9f00-0123456789ab";
        assert_eq!(parse_owner(&format!("{uuid}:42")), Some((uuid, "42")));
        assert_eq!(parse_owner("name"), None);
        assert_eq!(parse_owner(&format!("{uuid}:write")), None);
        assert_eq!(parse_owner("user:alice"), None);
    }

    #[test]
    fn globs_match_as_redis_does() {
        assert!(glob_match("*", ""));
        assert!(glob_match("order:*", "order:1001"));
        assert!(!glob_match("order:*", "orders"));
        assert!(glob_match("a?c", "abc"));
        assert!(glob_match("[ab]x", "bx"));
        assert!(!glob_match("[^ab]x", "bx"));
        assert!(glob_match("[a-c]*z", "b..z"));
        assert!(glob_match("a\\*", "a*"));
        assert!(!glob_match("a\\*", "ab"));
        assert!(glob_match("*:*:*", "a:b:c"));
        assert!(glob_match(&glob_escape("x*[y]"), "x*[y]"));
        assert!(!glob_match(&glob_escape("x*"), "xy"));
    }
}

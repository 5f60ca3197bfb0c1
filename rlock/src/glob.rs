//! Redis glob patterns (`SCAN … MATCH`), for the lock names a `MATCH` cannot select by
//! itself: those inside derived keys such as `redisson_lock_queue:{<name>}`.

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

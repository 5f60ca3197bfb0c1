//! Passwords never reach the terminal: URLs are printed with `***` in place of their
//! password, and every message that leaves the program (ours, redis-rs's, clap's) is
//! scrubbed of the secrets the command line and environment carried, since a library error
//! may quote the URL or the value it was given.

use std::sync::OnceLock;

/// What a password is replaced with (the library prints the same).
const REDACTED: &str = "***";

/// Query parameters that carry a password (`pass` is redis-rs's, on `redis+unix://` URLs).
const SECRET_PARAMETERS: [&str; 2] = ["pass", "password"];

/// The secrets of this run, registered once at start-up.
static SECRETS: OnceLock<Vec<String>> = OnceLock::new();

/// Registers the secrets to scrub from every message: the passwords of `urls` (as written
/// and percent-decoded) and the `others` given as they are. Later calls are ignored.
pub fn register<'a>(urls: impl IntoIterator<Item = &'a str>, others: &[&str]) {
    let mut secrets: Vec<String> = Vec::new();
    for url in urls {
        for secret in url_secrets(url) {
            secrets.push(percent_decode(&secret));
            secrets.push(secret);
        }
    }
    secrets.extend(others.iter().map(|s| s.to_string()));
    // A one-character secret would turn every message into stars, and is worth nothing.
    secrets.retain(|s| s.chars().count() > 1);
    // Longest first, so that a secret containing another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    let _ = SECRETS.set(secrets);
}

/// `text` with every registered secret replaced, and with the password of every URL in it
/// replaced too (a URL that was never registered, such as one clap quotes back).
pub fn scrub(text: &str) -> String {
    scrub_secrets(&redact_urls_in(text))
}

/// `text` with every registered secret replaced (URLs left as they are).
pub fn scrub_secrets(text: &str) -> String {
    let mut scrubbed = text.to_string();
    for secret in SECRETS.get().map(Vec::as_slice).unwrap_or_default() {
        scrubbed = scrubbed.replace(secret.as_str(), REDACTED);
    }
    scrubbed
}

/// `url` with the password of its user part and of its password parameters replaced.
pub fn redact_url(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut shown = redact_userinfo(head);
    if let Some(query) = query {
        shown.push('?');
        let parameters: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, value)) if is_secret_parameter(name) && !value.is_empty() => {
                    format!("{name}={REDACTED}")
                }
                _ => pair.to_string(),
            })
            .collect();
        shown.push_str(&parameters.join("&"));
    }
    shown
}

/// `scheme://user:password@rest` → `scheme://user:***@rest`.
fn redact_userinfo(head: &str) -> String {
    let Some(start) = head.find("://").map(|at| at + 3) else {
        return head.to_string();
    };
    let authority_end = head[start..]
        .find('/')
        .map_or(head.len(), |end| start + end);
    // The last `@`: a password may contain `@` when it is not percent-encoded.
    match head[start..authority_end].rfind('@') {
        Some(at) => {
            let userinfo = &head[start..start + at];
            let user = match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:{REDACTED}"),
                None => userinfo.to_string(),
            };
            format!("{}{user}{}", &head[..start], &head[start + at..])
        }
        None => head.to_string(),
    }
}

/// Every URL-looking word of `text` (from its scheme to the next blank or quote) redacted.
fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.'))
            .map_or(0, |i| i + 1);
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ',' | ')' | ']'))
            .map_or(rest.len(), |i| at + i);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The password of the URL's user part and of its password parameters, as written.
fn url_secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    if let Some(start) = head.find("://").map(|at| at + 3) {
        let authority_end = head[start..]
            .find('/')
            .map_or(head.len(), |end| start + end);
        if let Some(at) = head[start..authority_end].rfind('@') {
            if let Some((_, password)) = head[start..start + at].split_once(':') {
                found.push(password.to_string());
            }
        }
    }
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        if let Some((name, value)) = pair.split_once('=') {
            if is_secret_parameter(name) && !value.is_empty() {
                found.push(value.to_string());
            }
        }
    }
    found
}

fn is_secret_parameter(name: &str) -> bool {
    SECRET_PARAMETERS
        .iter()
        .any(|secret| secret.eq_ignore_ascii_case(name))
}

/// `%40` → `@`: redis-rs decodes the password, and may quote the decoded form.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_passwords() {
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(redact_url("redis://:pw@h:1/2"), "redis://:***@h:1/2");
        assert_eq!(redact_url("rediss://u:p@w@h:1"), "rediss://u:***@h:1");
        assert_eq!(redact_url("redis://u@h:1"), "redis://u@h:1");
        assert_eq!(
            redact_url("redis+unix:///s.sock?db=1&pass=pw"),
            "redis+unix:///s.sock?db=1&pass=***"
        );
    }

    #[test]
    fn text_is_scrubbed_of_urls_it_quotes() {
        assert_eq!(
            redact_urls_in("unexpected argument 'redis://x:hunter2@h:1' found"),
            "unexpected argument 'redis://x:***@h:1' found"
        );
        assert_eq!(
            url_secrets("redis://x:p%40ss@h"),
            vec!["p%40ss".to_string()]
        );
        assert_eq!(percent_decode("p%40ss%"), "p@ss%");
    }
}

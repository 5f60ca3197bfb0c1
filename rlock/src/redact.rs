//! Passwords never reach the terminal: URLs are printed with `***` in place of their
//! password (the library's [`redact_url`]), and every message that leaves the program (ours,
//! redis-rs's, clap's) is scrubbed of the secrets the command line and environment carried,
//! since a library error may quote the URL or the value it was given.

use std::sync::OnceLock;

use percent_encoding::percent_decode_str;
use redis_rlock::redact_url;

/// What a password is replaced with (the library prints the same).
const REDACTED: &str = "***";

/// The secrets of this run, registered once at start-up.
static SECRETS: OnceLock<Vec<String>> = OnceLock::new();

/// Registers the secrets to scrub from every message: the passwords of `urls` (as written
/// and percent-decoded) and the `others` given as they are. Later calls are ignored.
pub fn register<'a>(urls: impl IntoIterator<Item = &'a str>, others: &[&str]) {
    let mut secrets: Vec<String> = Vec::new();
    for secret in urls.into_iter().flat_map(redis_rlock::url_secrets) {
        // `%40` → `@`: redis-rs decodes the password, and may quote the decoded form.
        secrets.push(percent_decode_str(secret).decode_utf8_lossy().into_owned());
        secrets.push(secret.to_string());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_scrubbed_of_urls_it_quotes() {
        assert_eq!(
            redact_urls_in("unexpected argument 'redis://x:hunter2@h:1' found"),
            "unexpected argument 'redis://x:***@h:1' found"
        );
    }
}

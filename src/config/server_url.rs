//! [`ServerUrl`]: a Redis URL that never prints its secrets.
//!
//! A Redis URL carries the password (`redis://:secret@host`, `redis://user:secret@host`, or
//! `?pass=secret` on a Unix socket URL). Every place this crate prints a URL (`Debug` of the
//! client and its builder, error messages, log lines) prints [`ServerUrl`]'s redacted form,
//! made by [`redact_url`]; the raw text is handed to redis-rs alone. [`redact_url`] and
//! [`url_secrets`] are public, so that tools (the `rlock` inspector among them) print URLs
//! as the crate does.

use std::fmt;

use crate::error::Error;

/// What a password is replaced with.
const REDACTED: &str = "***";

/// Query parameters that carry a password (redis-rs reads `pass` on `redis+unix://` URLs;
/// `password` is the spelling other clients use).
const SECRET_PARAMETERS: [&str; 2] = ["pass", "password"];

/// A Redis URL as the user gave it, printed with its password replaced by `***`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ServerUrl {
    raw: String,
    shown: String,
}

impl ServerUrl {
    pub(crate) fn new(raw: impl Into<String>) -> Self {
        let raw = raw.into();
        let shown = redact_url(&raw);
        ServerUrl { raw, shown }
    }

    /// The URL with its secrets, for redis-rs only.
    pub(crate) fn raw(&self) -> &str {
        &self.raw
    }

    /// `text` with every occurrence of this URL's secrets replaced: for messages of other
    /// libraries that may quote the URL they were given.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut scrubbed = text.replace(&self.raw, &self.shown);
        for secret in url_secrets(&self.raw) {
            // A one-character password would turn every message into stars; such a secret is
            // worth nothing anyway.
            if secret.len() > 1 {
                scrubbed = scrubbed.replace(secret, REDACTED);
            }
        }
        scrubbed
    }

    /// [`Error::InvalidArgument`] for this URL, which redis-rs refused with `error`:
    /// `what` names it ("Redis URL", "sentinel URL"), and the secrets are scrubbed.
    pub(crate) fn invalid(&self, what: &str, error: &redis::RedisError) -> Error {
        let reason = self.scrub(&error.to_string());
        Error::invalid(format!("invalid {what} `{self}`: {reason}"))
    }
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.shown, f)
    }
}

/// The passwords a Redis URL carries, as written: that of its user part
/// (`redis://user:<this>@host`) and those of its `pass` or `password` query parameters
/// (`redis+unix:///run/redis.sock?pass=<this>`). For scrubbing text that may quote them
/// without the URL around them, such as another library's error message. Works on malformed
/// URLs as [`redact_url`] does.
///
/// ```
/// assert_eq!(redis_rlock::url_secrets("redis://app:s3cret@db:6379"), ["s3cret"]);
/// ```
pub fn url_secrets(url: &str) -> Vec<&str> {
    let (userinfo, query) = split(url);
    let password = userinfo.and_then(|userinfo| userinfo.split_once(':'));
    let mut found: Vec<&str> = password.map(|(_, password)| password).into_iter().collect();
    for (_, value) in query.into_iter().flat_map(secret_parameters) {
        found.push(value);
        // A URL parser ends the value at a fragment, and redis-rs uses what comes before.
        found.extend(value.split_once('#').map(|(password, _)| password));
    }
    found
}

/// A Redis URL as this crate prints it in logs, errors and `Debug`: the password of its user
/// part and of its `pass` or `password` query parameters replaced by `***`; the user name,
/// host and everything else as written. Works on malformed URLs too: an error about a URL
/// that did not parse must not quote its password either.
///
/// ```
/// use redis_rlock::redact_url;
///
/// assert_eq!(redact_url("rediss://app:s3cret@db:6380/0"), "rediss://app:***@db:6380/0");
/// let socket = "redis+unix:///r.sock?pass=s3cret&db=1";
/// assert_eq!(redact_url(socket), "redis+unix:///r.sock?pass=***&db=1");
/// ```
pub fn redact_url(url: &str) -> String {
    let mut shown = String::with_capacity(url.len());
    // Each secret is a slice of `url`, in order: copy what comes between them.
    let mut copied = 0;
    for secret in url_secrets(url) {
        let at = secret.as_ptr() as usize - url.as_ptr() as usize;
        // The part of a value before a fragment, listed after the value, is gone with it.
        if at >= copied {
            shown.push_str(&url[copied..at]);
            shown.push_str(REDACTED);
            copied = at + secret.len();
        }
    }
    shown.push_str(&url[copied..]);
    shown
}

/// The user part of `url` (before the last `@` of the authority) and its query (after the
/// first `?` that follows the user part, up to the end: a fragment after a secret parameter
/// is taken for part of the secret), as slices of it.
///
/// The authority ends at the first `/` or `?`; the user part is up to its last `@`, since a
/// password that is not percent-encoded may contain `@` (or `#`, which is why a fragment is
/// not looked for before the user part is found).
fn split(url: &str) -> (Option<&str>, Option<&str>) {
    let after_scheme = url.find("://").map_or(url, |at| &url[at + 3..]);
    let authority_end = after_scheme.find(['/', '?']).unwrap_or(after_scheme.len());
    let (userinfo, rest) = match after_scheme[..authority_end].rfind('@') {
        Some(at) => (Some(&after_scheme[..at]), &after_scheme[at + 1..]),
        None => (None, after_scheme),
    };
    (userinfo, rest.split_once('?').map(|(_, query)| query))
}

/// The `name=value` pairs of `query` that carry a password: a name of
/// [`SECRET_PARAMETERS`] and a value.
fn secret_parameters(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query.split('&').filter_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        let secret = SECRET_PARAMETERS
            .iter()
            .any(|secret| secret.eq_ignore_ascii_case(name));
        (secret && !value.is_empty()).then_some((name, value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_in_every_spelling() {
        let cases = [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            (
                "redis://:s3cret@127.0.0.1:6379/0",
                "redis://:***@127.0.0.1:6379/0",
            ),
            (
                "rediss://app:s3cret@db.internal:6380",
                "rediss://app:***@db.internal:6380",
            ),
            ("redis://app@host", "redis://app@host"),
            ("redis://:p@ss@host/2", "redis://:***@host/2"),
            (
                "redis+unix:///run/redis.sock?db=1&pass=s3cret&user=app",
                "redis+unix:///run/redis.sock?db=1&pass=***&user=app",
            ),
            (
                "unix:///tmp/r.sock?PASSWORD=s3cret",
                "unix:///tmp/r.sock?PASSWORD=***",
            ),
            (
                "rediss://:s3cret@host/#insecure",
                "rediss://:***@host/#insecure",
            ),
            (
                "redis://:s3cret@host?protocol=resp3",
                "redis://:***@host?protocol=resp3",
            ),
            ("not a url:s3cret@host", "not a url:***@host"),
            ("redis://:s3#cret@host", "redis://:***@host"),
            (
                "unix:///r.sock?pass=s3cret#x&db=1",
                "unix:///r.sock?pass=***&db=1",
            ),
            ("", ""),
        ];
        for (raw, shown) in cases {
            let url = ServerUrl::new(raw);
            assert_eq!(url.to_string(), shown, "{raw}");
            assert_eq!(format!("{url:?}"), format!("{shown:?}"), "{raw}");
            assert_eq!(url.raw(), raw);
        }
    }

    #[test]
    fn scrub_removes_the_password_from_foreign_text() {
        let url = ServerUrl::new("redis://app:hunter22@host:6379");
        assert_eq!(
            url.scrub("could not open redis://app:hunter22@host:6379 (hunter22)"),
            "could not open redis://app:***@host:6379 (***)"
        );
    }
}

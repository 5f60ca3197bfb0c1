//! [`ServerUrl`]: a Redis URL that never prints its secrets.
//!
//! A Redis URL carries the password (`redis://:secret@host`, `redis://user:secret@host`, or
//! `?pass=secret` on a Unix socket URL). Every place this crate prints a URL (`Debug` of the
//! client and its builder, error messages, log lines) prints [`ServerUrl`]'s redacted form;
//! the raw text is handed to redis-rs alone.

use std::fmt;

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
        let shown = redact(&raw);
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
        for secret in secrets(&self.raw) {
            // A one-character password would turn every message into stars; such a secret is
            // worth nothing anyway.
            if secret.len() > 1 {
                scrubbed = scrubbed.replace(secret, REDACTED);
            }
        }
        scrubbed
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

/// The password of the URL's user part and of its password query parameters, as written.
fn secrets(url: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let parts = split(url);
    if let Some((_, Some(password))) = parts.userinfo.map(split_userinfo) {
        found.push(password);
    }
    for (name, value) in parts.query.into_iter().flat_map(parameters) {
        if is_secret_parameter(name) && !value.is_empty() {
            found.push(value);
        }
    }
    found
}

/// `url` with the password of its user part and of its password query parameters replaced.
/// Works on malformed URLs too: an error about a URL that did not parse must not quote its
/// password either.
fn redact(url: &str) -> String {
    let parts = split(url);
    let mut shown = String::with_capacity(url.len());
    shown.push_str(parts.before_userinfo);
    if let Some(userinfo) = parts.userinfo {
        match split_userinfo(userinfo) {
            (user, Some(_)) => {
                shown.push_str(user);
                shown.push(':');
                shown.push_str(REDACTED);
            }
            (user, None) => shown.push_str(user),
        }
        shown.push('@');
    }
    shown.push_str(parts.host_and_path);
    if let Some(query) = parts.query {
        shown.push('?');
        let redacted: Vec<String> = parameters(query)
            .map(
                |(name, value)| match (is_secret_parameter(name), value.is_empty()) {
                    (true, false) => format!("{name}={REDACTED}"),
                    _ if query_has_value(query, name) => format!("{name}={value}"),
                    _ => name.to_string(),
                },
            )
            .collect();
        shown.push_str(&redacted.join("&"));
    }
    if let Some(fragment) = parts.fragment {
        shown.push('#');
        shown.push_str(fragment);
    }
    shown
}

/// The parts of a URL this module cares about, as slices of it.
struct Parts<'a> {
    /// `scheme://`, or nothing when the text has no scheme.
    before_userinfo: &'a str,
    /// What comes before the last `@` of the authority.
    userinfo: Option<&'a str>,
    /// Host, port and path.
    host_and_path: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

fn split(url: &str) -> Parts<'_> {
    let (rest, fragment) = match url.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (url, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    let authority_start = rest.find("://").map_or(0, |at| at + 3);
    let (before_userinfo, after_scheme) = rest.split_at(authority_start);
    let authority_end = after_scheme.find('/').unwrap_or(after_scheme.len());
    // The last `@` of the authority: a password may contain `@` when not percent-encoded.
    let (userinfo, host_and_path) = match after_scheme[..authority_end].rfind('@') {
        Some(at) => (Some(&after_scheme[..at]), &after_scheme[at + 1..]),
        None => (None, after_scheme),
    };
    Parts {
        before_userinfo,
        userinfo,
        host_and_path,
        query,
        fragment,
    }
}

/// `user:password` → (`user`, `Some(password)`); `user` → (`user`, `None`).
fn split_userinfo(userinfo: &str) -> (&str, Option<&str>) {
    match userinfo.split_once(':') {
        Some((user, password)) => (user, Some(password)),
        None => (userinfo, None),
    }
}

fn parameters(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
}

fn query_has_value(query: &str, name: &str) -> bool {
    query
        .split('&')
        .any(|pair| pair.split_once('=').is_some_and(|(n, _)| n == name))
}

fn is_secret_parameter(name: &str) -> bool {
    SECRET_PARAMETERS
        .iter()
        .any(|secret| secret.eq_ignore_ascii_case(name))
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

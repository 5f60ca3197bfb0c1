//! Keys are bytes. Redis keys, hash fields and channel names are binary strings, and a
//! keyspace shared with other applications holds keys that are not UTF-8 (`cache:\xff\xfe`):
//! the inspector reads every key as bytes, so that one such key never fails a walk, and a
//! lock whose name is not UTF-8 is still read and listed.
//!
//! The library's [`layout`] names keys as text. Its functions
//! only look for and add ASCII (`{`, `}`, `:`, the Redisson prefixes), so they are applied
//! here to a lossless text form of the bytes (backslashes doubled, each byte that is not
//! part of UTF-8 written `\xHH`) and the result turned back into bytes: one layout, written
//! once, for text and binary names alike.

use redis_rlock::protocol::layout::{self, Derived};

/// A Redis key (or channel, or hash field), as Redis stores it.
pub type Key = Vec<u8>;

/// How a key or name is printed and serialized: as it is when it is UTF-8; otherwise in its
/// lossless text form, with each byte that is not part of UTF-8 written `\xHH` (and
/// backslashes doubled, so that the form reads back to the same bytes).
pub fn shown(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => to_text(bytes),
    }
}

/// The key `kind` derives from the lock key `key` (Redisson's `prefixName`).
pub fn derived(kind: Derived, key: &[u8]) -> Key {
    from_text(&kind.of(&to_text(key)))
}

/// A fair waiter's own channel (see [`layout::fair_waiter_channel`]).
pub fn fair_waiter_channel(key: &[u8], owner: &[u8]) -> Key {
    from_text(&layout::fair_waiter_channel(&to_text(key), &to_text(owner)))
}

/// A count-down latch's channel (see [`layout::latch_channel`]).
pub fn latch_channel(key: &[u8]) -> Key {
    from_text(&layout::latch_channel(&to_text(key)))
}

/// An expirable semaphore's taken permits (see [`layout::permit_timeouts`]).
pub fn permit_timeouts(key: &[u8]) -> Key {
    from_text(&layout::permit_timeouts(&to_text(key)))
}

/// A derived key read back (see [`layout::parse_derived`]): its kind and the lock keys it
/// may belong to, most likely first.
pub fn parse_derived(scanned: &[u8]) -> Option<(Derived, Vec<Key>)> {
    let (kind, candidates) = layout::parse_derived(&to_text(scanned))?;
    Some((kind, candidates.iter().map(|c| from_text(c)).collect()))
}

/// The expirable semaphore whose permits the sorted set at `key` holds (see
/// [`layout::parse_permit_timeouts`]).
pub fn parse_permit_timeouts(key: &[u8]) -> Option<Key> {
    layout::parse_permit_timeouts(&to_text(key)).map(|k| from_text(&k))
}

/// The semaphore or latch whose channel is `channel` (see [`layout::parse_sync_channel`]).
pub fn parse_sync_channel(channel: &[u8]) -> Option<Key> {
    layout::parse_sync_channel(&to_text(channel)).map(|k| from_text(&k))
}

/// `bytes` as text, losslessly: UTF-8 runs as they are with `\` doubled, every other byte
/// `\xHH`. ASCII other than `\` is unchanged, which is all the layout looks at.
fn to_text(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        text.push_str(&chunk.valid().replace('\\', r"\\"));
        for byte in chunk.invalid() {
            text.push_str(&format!("\\x{byte:02x}"));
        }
    }
    text
}

/// [`to_text`] read back.
fn from_text(text: &str) -> Key {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'\\', Some(b'\\')) => {
                out.push(b'\\');
                i += 2;
            }
            (b'\\', Some(b'x')) => {
                let hex = text.get(i + 2..i + 4).unwrap_or_default();
                match u8::from_str_radix(hex, 16) {
                    Ok(byte) => {
                        out.push(byte);
                        i += 4;
                    }
                    Err(_) => {
                        out.push(b'\\');
                        i += 1;
                    }
                }
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_is_lossless() {
        for bytes in [
            &b"cache:\xff\xfe"[..],
            b"a\\xff",
            b"\\",
            "caf\u{e9}:\u{1b}[31m".as_bytes(),
            b"{tag\x80}:x",
        ] {
            assert_eq!(from_text(&to_text(bytes)), bytes, "{bytes:?}");
        }
        assert_eq!(shown(b"cache:\xff\xfe"), r"cache:\xff\xfe");
        assert_eq!(shown(b"a\\b"), r"a\b");
    }

    #[test]
    fn derived_keys_match_the_library_and_carry_bytes() {
        for name in ["orders:1", "{tenant}:job", r"back\slash"] {
            assert_eq!(
                derived(Derived::FairQueue, name.as_bytes()),
                Derived::FairQueue.of(name).into_bytes()
            );
        }
        assert_eq!(
            derived(Derived::FencingToken, b"lock:\xff"),
            b"redisson_lock_token:{lock:\xff}"
        );
        let (kind, candidates) = parse_derived(b"redisson_lock_queue:{lock:\xff}").unwrap();
        assert_eq!(kind, Derived::FairQueue);
        assert_eq!(candidates[0], b"lock:\xff");
    }
}

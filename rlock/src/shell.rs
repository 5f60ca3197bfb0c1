//! Words of the commands the inspector prints (`leaks`' fixes), quoted for a POSIX shell,
//! so that a name is one word whatever it holds, and never shows a raw control character
//! on the terminal that prints the command.

use crate::render::is_unsafe;

/// `text` quoted for a POSIX shell when it needs to be: as it is when it is plain, in
/// single quotes otherwise, and as `$'…'` (POSIX.1-2024; bash, zsh, ksh, busybox) with
/// escapes when it holds control characters, which single quotes would print raw.
pub fn quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        text.to_string()
    } else if !text.chars().any(is_unsafe) {
        format!("'{}'", text.replace('\'', r"'\''"))
    } else {
        dollar_quoted(text.as_bytes())
    }
}

/// `bytes` quoted for a POSIX shell: as [`quote`] for UTF-8, and as `$'…'` with `\xHH` for
/// the bytes that are not.
pub fn quote_bytes(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => quote(text),
        Err(_) => dollar_quoted(bytes),
    }
}

/// `$'…'`: printable UTF-8 as it is, `\\` and `\'` escaped, everything else as `\xHH`.
fn dollar_quoted(bytes: &[u8]) -> String {
    let mut out = String::from("$'");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str(r"\\"),
                '\'' => out.push_str(r"\'"),
                c if !is_unsafe(c) => out.push(c),
                c => {
                    for byte in c.encode_utf8(&mut [0; 4]).bytes() {
                        out.push_str(&format!("\\x{byte:02x}"));
                    }
                }
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(quote("order:1001"), "order:1001");
        assert_eq!(quote("{jobs}"), "'{jobs}'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("-h"), "-h");
        assert_eq!(quote("a\nb\u{1b}[2J"), r"$'a\x0ab\x1b[2J'");
        assert_eq!(quote("it's\n"), r"$'it\'s\x0a'");
        assert_eq!(quote_bytes(b"cache:\xff\xfe"), r"$'cache:\xff\xfe'");
    }
}

//! A command Redis refused for lack of an ACL permission, named as the library names one
//! (its `Error::PermissionDenied`: "Redis refused … the user lacks …", with the rule to
//! grant), so that an operator adds the one rule missing rather than guess it from
//! `NOPERM`. The inspector's own rules are in the README's Operations section.

use crate::exit::Failure;
use crate::keys::shown;

/// The failure for the refused `command` (its ACL name: `scan`, `pubsub|numsub`) sent to
/// `node` about `object` (a key, or a channel for `pubsub`), when Redis answered `code`
/// and `detail`; `None` when the refusal is not an ACL one.
pub fn refused(
    node: &str,
    command: &str,
    object: Option<&[u8]>,
    code: &str,
    detail: &str,
) -> Option<Failure> {
    if code != "NOPERM" {
        return None;
    }
    // Redis 7.0 says "this user has no permissions to run the 'scan' command" or "… to
    // access one of the keys (channels) used as arguments"; 7.2 "No permissions to access
    // a key (channel)".
    let said = detail.to_lowercase();
    let missing = match object {
        Some(object) if said.contains("access") && said.contains("channel") => format!(
            "access to channel `{}` (an `&` pattern that covers it)",
            shown(object)
        ),
        Some(object) if said.contains("access") && said.contains("key") => format!(
            "access to key `{}` (a `~` pattern that covers it)",
            shown(object)
        ),
        Some(object) if !command.starts_with("pubsub") => {
            format!("permission to run `+{command}` on key `{}`", shown(object))
        }
        _ => format!("permission to run `+{command}`"),
    };
    Some(Failure::redis(format!(
        "Redis refused reading `{node}`: the user lacks {missing} (the rules `rlock` needs \
         are in the README's Operations section; Redis answered: {code} {detail})"
    )))
}

/// The failure for an error `error` of `command` sent to `node`: named as an ACL refusal
/// when it is one, otherwise as [`Failure::from_redis`] with `context`.
pub fn failure(
    context: &str,
    node: &str,
    command: &str,
    object: Option<&[u8]>,
    error: &redis::RedisError,
) -> Failure {
    error
        .code()
        .and_then(|code| refused(node, command, object, code, error.detail().unwrap_or("")))
        .unwrap_or_else(|| Failure::from_redis(context, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_rule() {
        let scan = refused(
            "127.0.0.1:6379",
            "scan",
            None,
            "NOPERM",
            "this user has no permissions to run the 'scan' command",
        )
        .unwrap();
        assert!(
            scan.message
                .starts_with("Redis refused reading `127.0.0.1:6379`: the user lacks permission to run `+scan` ("),
            "{}",
            scan.message
        );
        let key = refused(
            "n",
            "pttl",
            Some(b"app:1"),
            "NOPERM",
            "No permissions to access a key",
        )
        .unwrap();
        assert!(
            key.message.contains("access to key `app:1`"),
            "{}",
            key.message
        );
        assert!(refused("n", "scan", None, "WRONGTYPE", "x").is_none());
    }
}

//! The driver's JSON lines: the `ready` line once its client is connected, then one reply
//! per request.

use serde_json::Value;

/// What the driver says once its client is connected.
#[derive(Debug, Clone)]
pub struct Ready {
    /// Redisson's version, read from its jar.
    pub version: String,
    /// The client's id (`RedissonClient.getId()`): the first part of its owner fields.
    pub client_id: String,
    /// The JVM's process id.
    pub pid: u32,
}

/// One reply of the driver.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The request's id.
    pub id: u64,
    /// Whether the call returned (rather than threw).
    pub ok: bool,
    /// The Java thread id of the logical thread that ran it (Redisson's owner id).
    pub thread_id: u64,
    /// Wall-clock microseconds since the epoch just before the Redisson call.
    pub start_us: i64,
    /// Wall-clock microseconds since the epoch just after it returned or threw.
    pub end_us: i64,
    /// What it returned (null for `void`).
    pub value: Value,
    /// The exception's simple class name, when it threw.
    pub error: Option<String>,
    /// The exception's message, when it threw.
    pub message: Option<String>,
}

impl Reply {
    /// The reply on `line`, if it is one.
    pub(super) fn parse(line: &str) -> Option<Reply> {
        let v: Value = serde_json::from_str(line).ok()?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(Reply {
            id: v.get("id")?.as_u64()?,
            ok: v.get("ok")?.as_bool()?,
            thread_id: v.get("thread_id").and_then(Value::as_u64).unwrap_or(0),
            start_us: v.get("start_us").and_then(Value::as_i64).unwrap_or(0),
            end_us: v.get("end_us").and_then(Value::as_i64).unwrap_or(0),
            value: v.get("value").cloned().unwrap_or(Value::Null),
            error: text("error"),
            message: text("message"),
        })
    }

    /// This reply, which must be a successful one.
    ///
    /// # Panics
    ///
    /// When the call threw, with the exception.
    #[track_caller]
    pub fn ok(self) -> Reply {
        assert!(
            self.ok,
            "Java call {} threw {}: {}",
            self.id,
            self.error.as_deref().unwrap_or("?"),
            self.message.as_deref().unwrap_or("")
        );
        self
    }

    /// The returned boolean.
    ///
    /// # Panics
    ///
    /// When the call threw or returned something else.
    #[track_caller]
    pub fn bool(self) -> bool {
        let value = self.ok().value;
        value
            .as_bool()
            .unwrap_or_else(|| panic!("not a boolean: {value}"))
    }

    /// The returned integer.
    ///
    /// # Panics
    ///
    /// When the call threw or returned something else.
    #[track_caller]
    pub fn int(self) -> i64 {
        let value = self.ok().value;
        value
            .as_i64()
            .unwrap_or_else(|| panic!("not an integer: {value}"))
    }

    /// The returned integer, or `None` for null (a fenced `tryLock` that failed).
    ///
    /// # Panics
    ///
    /// When the call threw or returned something else.
    #[track_caller]
    pub fn opt_int(self) -> Option<i64> {
        let value = self.ok().value;
        if value.is_null() {
            return None;
        }
        Some(
            value
                .as_i64()
                .unwrap_or_else(|| panic!("not an integer: {value}")),
        )
    }
}

/// The ready line's content, if `line` is the ready line.
pub(super) fn parse_ready(line: &str) -> Option<Ready> {
    let v: Value = serde_json::from_str(line).ok()?;
    if v.get("event")?.as_str()? != "ready" {
        return None;
    }
    Some(Ready {
        version: v.get("redisson")?.as_str()?.to_owned(),
        client_id: v.get("client_id")?.as_str()?.to_owned(),
        pid: u32::try_from(v.get("pid")?.as_u64()?).ok()?,
    })
}

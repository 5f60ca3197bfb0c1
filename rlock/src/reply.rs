//! Reading Redis replies as the inspector needs them: integers and text whatever their RESP
//! type, and the masters of a `CLUSTER SLOTS` reply.

use redis::Value;

/// A master's `(host, port)` and the slot ranges it serves.
pub type MasterSlots = ((String, u16), Vec<(u16, u16)>);

/// The masters of a `CLUSTER SLOTS` reply with their slot ranges, in slot order.
pub fn masters_of(reply: &Value, default_host: String) -> Vec<MasterSlots> {
    let mut masters: Vec<MasterSlots> = Vec::new();
    let mut ranges: Vec<(u16, u16, String, u16)> = Vec::new();
    for range in reply.as_sequence().unwrap_or_default() {
        let Some(parts) = range.as_sequence() else {
            continue;
        };
        let (Some(start), Some(end), Some(master)) = (
            parts.first().and_then(as_int),
            parts.get(1).and_then(as_int),
            parts.get(2).and_then(Value::as_sequence),
        ) else {
            continue;
        };
        let host = master.first().and_then(as_text).unwrap_or_default();
        let host = if host.is_empty() || host == "?" {
            default_host.clone()
        } else {
            host
        };
        let Some(port) = master.get(1).and_then(as_int) else {
            continue;
        };
        ranges.push((start as u16, end as u16, host, port as u16));
    }
    ranges.sort();
    for (start, end, host, port) in ranges {
        match masters
            .iter_mut()
            .find(|(addr, _)| addr.0 == host && addr.1 == port)
        {
            Some((_, slots)) => slots.push((start, end)),
            None => masters.push(((host, port), vec![(start, end)])),
        }
    }
    masters
}

/// An integer reply.
pub fn as_int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::SimpleString(text) => text.parse().ok(),
        _ => None,
    }
}

/// A string reply, as text.
pub fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Some(text.clone()),
        Value::Okay => Some("OK".to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_slots_give_masters_in_slot_order() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let range = |a: i64, b: i64, master: Value| {
            Value::Array(vec![Value::Int(a), Value::Int(b), master])
        };
        let reply = Value::Array(vec![
            range(5461, 10922, node("127.0.0.1", 7001)),
            range(0, 5460, node("", 7000)),
            range(10923, 16383, node("127.0.0.1", 7000)),
        ]);
        let masters = masters_of(&reply, "127.0.0.1".into());
        assert_eq!(masters.len(), 2);
        assert_eq!(masters[0].0, ("127.0.0.1".to_string(), 7000));
        assert_eq!(masters[0].1, vec![(0, 5460), (10923, 16383)]);
        assert_eq!(masters[1].1, vec![(5461, 10922)]);
    }
}

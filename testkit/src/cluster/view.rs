//! What the nodes say: one node's view of itself and the cluster in one round trip, the
//! slot map parsed from `CLUSTER SLOTS`, and whether every node agrees on a whole cluster.

use std::collections::BTreeSet;
use std::time::Duration;

use redis::Value;

use crate::servers::connect;

use super::SLOTS;

/// How long one look at one node may take. Shorter than
/// [`QUERY_TIMEOUT`](crate::servers::QUERY_TIMEOUT) because a frozen node costs this much on
/// every poll.
const LOOK_TIMEOUT: Duration = Duration::from_millis(500);

/// One range of slots as `CLUSTER SLOTS` gives it, nodes by port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct SlotRange {
    pub(super) start: u16,
    pub(super) end: u16,
    pub(super) master: u16,
    /// Sorted: nodes list replicas in no particular order.
    pub(super) replicas: Vec<u16>,
}

/// What one node says about itself and the cluster.
pub(super) struct NodeView {
    pub(super) port: u16,
    pub(super) state: String,
    /// `role:slave` and whether its link to its master is up.
    pub(super) replica: bool,
    pub(super) link_up: bool,
    pub(super) slots: Vec<SlotRange>,
}

/// The cluster as every node in `ports` sees it, if they all agree and it is whole: the
/// agreed slot map, or why not. Nodes that do not answer fail the check when `all` is set
/// and are left out otherwise. With `replicas`, every master must list that many replicas.
pub(super) fn agreed_view(
    ports: &[u16],
    all: bool,
    replicas: Option<usize>,
) -> Result<Vec<SlotRange>, String> {
    let mut views = Vec::new();
    for &port in ports {
        match look(port) {
            Ok(view) => views.push(view),
            Err(e) if all => return Err(e),
            Err(_) => {}
        }
    }
    let Some(first) = views.first() else {
        return Err("no node answers".into());
    };
    let answering: BTreeSet<u16> = views.iter().map(|v| v.port).collect();
    for view in &views {
        if view.state != "ok" {
            return Err(format!("node {}: cluster_state:{}", view.port, view.state));
        }
        if view.replica && !view.link_up {
            return Err(format!("replica {}: master link down", view.port));
        }
    }
    let mut next = 0u32;
    for range in &first.slots {
        if u32::from(range.start) != next {
            return Err(format!(
                "node {} sees slots {next}-{} unserved",
                first.port, range.start
            ));
        }
        next = u32::from(range.end) + 1;
        if !answering.contains(&range.master) {
            return Err(format!(
                "slots {}-{} are served by {}, which does not answer",
                range.start, range.end, range.master
            ));
        }
        if let Some(n) = replicas {
            if range.replicas.len() != n {
                return Err(format!(
                    "master {} has replicas {:?}",
                    range.master, range.replicas
                ));
            }
        }
    }
    if next != u32::from(SLOTS) {
        return Err(format!(
            "node {} sees slots {next}-16383 unserved",
            first.port
        ));
    }
    for view in &views[1..] {
        if view.slots != first.slots {
            return Err(format!(
                "node {} sees {:?}, node {} sees {:?}",
                first.port, first.slots, view.port, view.slots
            ));
        }
    }
    Ok(first.slots.clone())
}

/// One node's view: `CLUSTER INFO`, `CLUSTER SLOTS` and `INFO replication` in one round
/// trip, within [`LOOK_TIMEOUT`].
pub(super) fn look(port: u16) -> Result<NodeView, String> {
    let mut conn = connect(port, LOOK_TIMEOUT).map_err(|e| format!("node {port}: {e}"))?;
    let (info, slots, replication): (String, Value, String) = redis::pipe()
        .cmd("CLUSTER")
        .arg("INFO")
        .cmd("CLUSTER")
        .arg("SLOTS")
        .cmd("INFO")
        .arg("replication")
        .query(&mut conn)
        .map_err(|e| format!("node {port}: {e}"))?;
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    Ok(NodeView {
        port,
        state: field(&info, "cluster_state"),
        replica: field(&replication, "role") == "slave",
        link_up: field(&replication, "master_link_status") == "up",
        slots: parse_slots(&slots).map_err(|e| format!("node {port}: CLUSTER SLOTS: {e}"))?,
    })
}

/// `CLUSTER SLOTS`: `[[start, end, [ip, port, id, ...], [replica ...]...], ...]`, sorted by
/// start.
fn parse_slots(reply: &Value) -> Result<Vec<SlotRange>, String> {
    let int = |v: &Value| match v {
        Value::Int(n) => u16::try_from(*n).map_err(|e| e.to_string()),
        other => Err(format!("expected an integer, got {other:?}")),
    };
    let port = |v: &Value| match v {
        Value::Array(node) if node.len() >= 2 => int(&node[1]),
        other => Err(format!("expected a node, got {other:?}")),
    };
    let Value::Array(entries) = reply else {
        return Err(format!("expected an array, got {reply:?}"));
    };
    let mut ranges = Vec::new();
    for entry in entries {
        let Value::Array(items) = entry else {
            return Err(format!("expected a range, got {entry:?}"));
        };
        if items.len() < 3 {
            return Err(format!("short range {items:?}"));
        }
        let mut replicas = items[3..].iter().map(port).collect::<Result<Vec<_>, _>>()?;
        replicas.sort_unstable();
        ranges.push(SlotRange {
            start: int(&items[0])?,
            end: int(&items[1])?,
            master: port(&items[2])?,
            replicas,
        });
    }
    ranges.sort_by_key(|r| r.start);
    Ok(ranges)
}

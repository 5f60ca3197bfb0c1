//! The cancellation matrix: one test per lock kind, cancel point and Redis state
//! (`kind::point::redis_state`), each cancelling every entry point in turn.

use super::axes::{Kind, Point, Redis};
use super::scene::Scene;

/// One test of the matrix: every entry point of `point` cancelled there in turn.
async fn cell(kind: Kind, point: Point, redis: Redis) {
    let scene = Scene::start(kind, redis).await;
    for &entry in point.entries() {
        scene.cancel(point, entry).await;
    }
}

/// The matrix: for each kind, its cancel points, each with Redis up and frozen.
macro_rules! matrix {
    ($($kind_mod:ident: $kind:expr => [$($point_mod:ident: $point:expr),* $(,)?];)*) => {$(
        mod $kind_mod {
            use super::*;
            $(
                mod $point_mod {
                    use super::*;

                    #[tokio::test]
                    async fn redis_up() {
                        cell($kind, $point, Redis::Up).await;
                    }

                    #[tokio::test]
                    async fn redis_frozen() {
                        cell($kind, $point, Redis::Frozen).await;
                    }
                }
            )*
        }
    )*};
}

matrix! {
    rlock: Kind::RLock => [
        in_the_first_script_call: Point::FirstScript,
        while_subscribing: Point::Subscribing,
        in_the_script_call_after_subscribing: Point::ScriptAfterSubscribing,
        while_waiting: Point::Waiting,
    ];
    fair_lock: Kind::FairLock => [
        in_the_first_script_call: Point::FirstScript,
        while_subscribing: Point::Subscribing,
        in_the_script_call_after_subscribing: Point::ScriptAfterSubscribing,
        while_waiting: Point::Waiting,
    ];
    fenced_lock: Kind::FencedLock => [
        in_the_first_script_call: Point::FirstScript,
        while_subscribing: Point::Subscribing,
        in_the_script_call_after_subscribing: Point::ScriptAfterSubscribing,
        while_waiting: Point::Waiting,
    ];
    redlock: Kind::RedLock => [
        in_the_first_script_call: Point::FirstScript,
        after_taking_some_masters: Point::SomeMastersTaken,
        while_subscribing: Point::Subscribing,
        in_the_script_call_after_subscribing: Point::ScriptAfterSubscribing,
        while_waiting: Point::Waiting,
    ];
    multilock: Kind::MultiLock => [
        in_the_first_script_call: Point::FirstScript,
        after_taking_some_masters: Point::SomeMastersTaken,
        while_subscribing: Point::Subscribing,
        in_the_script_call_after_subscribing: Point::ScriptAfterSubscribing,
        while_waiting: Point::Waiting,
    ];
}

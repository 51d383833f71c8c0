//! The tree as a whole: every supervisor starts, a failed one is replaced alone, shutdown
//! stops them all.

use ractor::ActorCell;

use super::*;
use crate::test_support::runtime_deps;

async fn paths(runtime: &ActorRuntime) -> Vec<String> {
    let mut paths: Vec<String> = runtime
        .tree()
        .await
        .expect("tree")
        .into_iter()
        .map(|s| s.path)
        .collect();
    paths.sort();
    paths
}

#[tokio::test]
async fn the_runtime_starts_every_supervisor() {
    let (deps, _dir, _model) = runtime_deps().await;
    let runtime = ActorRuntime::start(deps).await.expect("start");
    assert_eq!(
        paths(&runtime).await,
        [
            "root/channels",
            "root/conversations",
            "root/events",
            "root/flows",
            "root/inbound",
            "root/media",
            "root/scheduler"
        ]
    );
    runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_failed_supervisor_is_restarted_and_the_others_are_untouched() {
    let (deps, _dir, _model) = runtime_deps().await;
    let runtime = ActorRuntime::start(deps).await.expect("start");
    let ids = |runtime: &ActorRuntime| {
        let mut ids: Vec<_> = runtime
            .root()
            .get_children()
            .iter()
            .map(ActorCell::get_id)
            .collect();
        ids.sort();
        ids
    };
    let before = ids(&runtime);
    runtime
        .root()
        .send_message(RootMsg::CrashChild(SupervisorKind::Scheduler))
        .expect("send");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let after = loop {
        let now = ids(&runtime);
        if now.len() == before.len() && now != before {
            break now;
        }
        assert!(tokio::time::Instant::now() < deadline, "not restarted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let kept = before.iter().filter(|id| after.contains(id)).count();
    assert_eq!(
        kept,
        before.len() - 1,
        "only the failed supervisor is replaced"
    );
    assert!(paths(&runtime).await.contains(&"root/scheduler".to_owned()));
    runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn shutdown_stops_every_actor() {
    let (deps, _dir, _model) = runtime_deps().await;
    let runtime = ActorRuntime::start(deps).await.expect("start");
    let root = runtime.root().clone();
    runtime.shutdown(Duration::from_secs(5)).await;
    assert_eq!(root.get_status(), ractor::ActorStatus::Stopped);
}

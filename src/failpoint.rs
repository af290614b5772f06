//! Fault injection for the crash and race tests (docs/testing.md): with
//! `CREWLET_FAILPOINT=<name>` the process aborts at that point, exactly as
//! a kill would leave it; with `CREWLET_FAILPOINT=<name>:sleep=<ms>` it
//! pauses there, so that a test can act inside the window. The points:
//! `after_stream_info` (the tick has read the logs' stream info, and has
//! not absorbed gate records yet), `after_segment` (a segment of a fold is durable, the next is not
//! written yet), `after_fold` (segments are durable, the answer naming
//! them is not published), `after_publish` (the answer is published and
//! the purge it licenses is not sent yet), `after_pins` (a log's pins are
//! re-read before its purge, and its fence is not taken yet),
//! `after_fence` (the fence's
//! permit is granted and the purge is not sent yet), `erase_after_live`
//! and `erase_after_rewrite` (an erasure's steps), `ack_before_write`
//! (an acknowledgement is judged and not written yet). One point changes what a
//! reader is shown instead ([`is_set`]): `gate_reader_behind` (the gate
//! records' reader is offered nothing, as a replica that has none of them
//! would), `requested_race` (another request writes the requested
//! watermark between each read and compare-and-set of `trim`) and
//! `join_hold_release_fails:N` (a stopped readmission's first N attempts
//! to release its join hold are not taken). Inert unless set.
//!
//! Compiled only into test builds (debug, as `cargo test` builds the
//! binary the integration tests run) or with the `failpoints` feature: a
//! release binary has none, and no environment variable can abort it.

#[cfg(any(debug_assertions, feature = "failpoints"))]
use std::time::Duration;

/// Aborts or pauses at `name` when `CREWLET_FAILPOINT` names it.
#[cfg(any(debug_assertions, feature = "failpoints"))]
pub async fn failpoint(name: &str) {
    let Ok(v) = std::env::var("CREWLET_FAILPOINT") else {
        return;
    };
    let (point, action) = v.split_once(':').unwrap_or((v.as_str(), ""));
    if point != name {
        return;
    }
    match action.strip_prefix("sleep=").map(str::parse::<u64>) {
        Some(Ok(ms)) => {
            tracing::warn!(event = "failpoint", name, ms, "CREWLET_FAILPOINT: pausing");
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        _ => {
            tracing::error!(event = "failpoint", name, "CREWLET_FAILPOINT: aborting");
            std::process::abort();
        }
    }
}

/// Whether `CREWLET_FAILPOINT` names `name` (a point that changes what a
/// reader is shown rather than stopping the process).
#[cfg(any(debug_assertions, feature = "failpoints"))]
pub fn is_set(name: &str) -> bool {
    std::env::var("CREWLET_FAILPOINT").is_ok_and(|v| v.split(':').next() == Some(name))
}

/// The number after `CREWLET_FAILPOINT=<name>:` (`join_hold_release_fails:2`:
/// the first two attempts fail); 0 when there is none.
#[cfg(any(debug_assertions, feature = "failpoints"))]
pub fn count(name: &str) -> u32 {
    std::env::var("CREWLET_FAILPOINT")
        .ok()
        .and_then(|v| {
            let (point, n) = v.split_once(':')?;
            (point == name).then(|| n.parse().ok()).flatten()
        })
        .unwrap_or(0)
}

/// A release build: no failpoint.
#[cfg(not(any(debug_assertions, feature = "failpoints")))]
pub fn count(_name: &str) -> u32 {
    0
}

/// A release build: no failpoint.
#[cfg(not(any(debug_assertions, feature = "failpoints")))]
pub async fn failpoint(_name: &str) {}

/// A release build: no failpoint.
#[cfg(not(any(debug_assertions, feature = "failpoints")))]
pub fn is_set(_name: &str) -> bool {
    false
}

//! The reference model learns the preview: for random fleets and a
//! random gesture, the preview's answer is the model's answer for the
//! fleet with the gesture made.

use proptest::prelude::*;

use crate::floor::model_tests::{case, may_go_req, world, CursorCase};
use crate::floor::tests::{now, World};
use crate::floor::ParsedRows;

/// A gesture to preview on a case: 0 release hold `i`, 1 evict node `i`
/// (forced: the model counts an evicted node out whether it is live or
/// not), 2 readmit node `i`.
#[derive(Debug, Clone, Copy)]
struct GestureCase {
    kind: u8,
    index: usize,
}

fn gesture_case() -> impl Strategy<Value = GestureCase> {
    (0u8..3, 0usize..6).prop_map(|(kind, index)| GestureCase { kind, index })
}

/// The configuration the preview judges against: the world's one domain
/// and backup policy.
fn preview_config(w: &World) -> crate::config::Config {
    let mut config = crate::config::check(
        "node: {id: node-1}\nnats: {url: \"nats://127.0.0.1:4222\"}\ndomains: [{name: tracker, stream: CREWLET_TRACKER_LOG}]\n",
    )
    .config
    .expect("a valid configuration");
    config.domains = vec![w.domain.clone()];
    config.retention.backup_floor = w.policy.backup_floor;
    config
}

proptest! {
    #![proptest_config(crate::seeded::config(1500))]

    /// A preview of a gesture is the model's answer for the fleet with the
    /// gesture made: the same rules, asked of the changed case.
    #[test]
    fn a_preview_is_the_models_answer_for_the_changed_fleet(c in case(), g in gesture_case()) {
        let mut c = c;
        let mut g = g;
        prop_assume!(!c.nodes.is_empty());
        if g.kind == 0 && c.holds.is_empty() {
            g.kind = 1;
        }
        g.index %= if g.kind == 0 { c.holds.len() } else { c.nodes.len() };
        // Gestures on nodes need a log that takes gate records; where the
        // case has none, one whose view has no cursor yet (the trim is the
        // same, only the purge waits for the view).
        if g.kind != 0 && c.gates.is_none() {
            c.gates = Some(CursorCase::None);
        }
        let w = world(&c);
        let config = preview_config(&w);
        let rows = ParsedRows::from_rows(&w.rows());
        let reads = vec![w.read()];
        let mut changed = c.clone();
        let mut ask = crate::preview::Ask { force: true, ..Default::default() };
        match g.kind {
            0 => {
                ask.release.push(format!("h{}", g.index));
                changed.holds.remove(g.index);
            }
            1 => {
                ask.evict.push(format!("node-{}", g.index));
                changed.nodes[g.index].gate = 2;
            }
            _ => {
                ask.readmit.push(format!("node-{}", g.index));
                changed.nodes[g.index].gate = 4;
            }
        }
        let after = match crate::preview::apply(&config, &rows, &reads, &ask, w.policy.fence_window, now()) {
            Ok(after) => after,
            // Refused as the real gesture would be (a readmission below the
            // floor, a node not evicted): nothing to compare.
            Err(crate::preview::Refused::Readmit { .. }) => return Ok(()),
            Err(e) => return Err(TestCaseError::fail(format!("refused: {e}"))),
        };
        let a = &crate::tick::compute_each(&config, &w.policy, &after.rows, &after.reads, now())[0];
        let mut expect = 0;
        while expect < changed.last && may_go_req(&changed, expect + 1) {
            expect += 1;
        }
        prop_assert_eq!(a.trim_to, expect, "case {:?}\ngesture {:?}\nterms {:?}", c, g, a.terms);
        let before = w.answer();
        let p = &crate::preview::compare(&ask, std::slice::from_ref(&before), std::slice::from_ref(a), &reads)[0];
        prop_assert_eq!((p.trim_to, p.would_trim_to), (before.trim_to, expect));
    }
}

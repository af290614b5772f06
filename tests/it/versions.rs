//! The oldest nats-server release line crewlet supports (2.10, as
//! `scripts/install-test-deps` installs it into `.tools/nats-oldest`): the
//! tick's core works there as on the newest.

use std::time::Duration;

use crate::support::fleet::*;
use crewlet::floor::TermName;

/// nats-server 2.10 does not answer a message get by `start_time` (400,
/// 10003): the age lookup used to be unreadable on every tick, silently
/// never trimming. It is found from sequences and their timestamps there.
#[tokio::test]
async fn on_the_oldest_supported_server_the_age_floor_reads_and_the_trim_runs() {
    let mut f = Fleet::on_oldest(30).await;
    f.config.retention.min_age = crewlet::config::Dur(Duration::from_secs(2));
    f.healthy(&[("node-1", 30)], 30).await;
    tokio::time::sleep(Duration::from_millis(2300)).await;
    // Young records after the old ones.
    f.publish(10).await;
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    assert_eq!(
        term_state(&r, TermName::AgeFloor),
        "value 30",
        "{:?}",
        r.domains[0].answer.terms
    );
    assert_eq!(f.first_seq().await, 31, "the old records are trimmed");
}

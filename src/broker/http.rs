//! What the HTTP surface asks the broker beyond the tick: whether the
//! connection is up (`/readyz`) and a log's tail (`/v1/streams/{s}/tail`,
//! `crewlet retention tail`).

use super::{Broker, Fault};

/// A log's tail: the next sequence and the newest record's broker time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    pub next_seq: u64,
    /// Milliseconds since the epoch; 0 when the log holds no record (its
    /// whole history has been trimmed away, or it never had one).
    pub timestamp_ms: i64,
}

impl Broker {
    /// The client's connection to the broker is up.
    pub fn connected(&self) -> bool {
        self.outage().is_none()
    }

    /// The tail of `stream`, from one stream-info request.
    pub async fn tail(&self, stream: &str) -> Result<Option<Tail>, super::Fault> {
        let Some(info) = self.stream_info_of(stream).await? else {
            return Ok(None);
        };
        let state = info.state;
        let timestamp_ms = if state.messages == 0 {
            0
        } else {
            i64::try_from(state.last_timestamp.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
        };
        Ok(Some(Tail {
            next_seq: state.last_sequence + 1,
            timestamp_ms,
        }))
    }

    pub(super) async fn stream_info_of(
        &self,
        stream: &str,
    ) -> Result<Option<async_nats::jetstream::stream::Info>, super::Fault> {
        // The leader's word: a joiner starts from the tail it is given.
        match self.stream_led(stream).await {
            Ok(s) => Ok(Some(s.cached_info().clone())),
            Err(Fault::Missing(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

//! The gestures: what an operator (or a tool) asks of the fleet, each in a
//! file of its own (docs/architecture.md, Gestures), each with the same
//! five parts: `check` (pure: the ask, or bad input
//! naming the field), `facts` (IO: what the judge needs, read proven),
//! `judge` (pure, table-tested: a plan, or a refusal with its code),
//! `apply` (IO: carries the plan out, deciding nothing) and `json`/`text`
//! (the outcome's JSON and words). The CLI, the HTTP routes and the
//! previews call the same parts; every outcome is an
//! [`crate::exit::Outcome`].

/// `ack`: an operator's acknowledgement (`backup_floor: operator`).
pub mod ack;
/// `adopt`: a log that lost the sidecar's memory, opened afresh.
pub mod adopt;
/// `set-capacity`: a log's `max_bytes`.
pub mod capacity;
/// `erase`: one subject's records, from the log and the archive.
pub mod erase;
/// `evict` and `readmit`: gate records on every gated log.
pub mod evict;
/// `hold` and `release`: live pins, with their handshake.
pub mod hold;
/// `reanchor`: a recreated or restored log adopted by opening the next generation.
pub mod reanchor;
/// `trim`: raising the requested watermark (explicit trim).
pub mod trim;

/// CHECK (pure), shared by the gestures confirmed by a stream's `created`
/// (`reanchor`, `adopt`): a configured stream (or domain name), and
/// `-confirm` an instant. The error names the flag and what is allowed;
/// `gesture` is the command that prints the value to give.
pub fn check_confirmed(
    config: &crate::config::Config,
    stream: &str,
    confirm: Option<&str>,
    gesture: &str,
) -> Result<(crate::config::Domain, Option<crate::rows::Timestamp>), String> {
    let Some(domain) = config.domain(stream).cloned() else {
        let known: Vec<String> = config
            .domains
            .iter()
            .map(|d| format!("{} ({})", d.stream, d.name))
            .collect();
        return Err(format!(
            "-stream {stream:?} is not a configured stream; configured: {}",
            known.join(", ")
        ));
    };
    let confirm = confirm
        .map(crate::rows::Timestamp::parse)
        .transpose()
        .map_err(|e| {
            format!(
                "-confirm: {e}; pass the live stream's created exactly as `crewlet retention {gesture} -stream {}` prints it",
                domain.stream
            )
        })?;
    Ok((domain, confirm))
}

/// What the gestures confirmed by a stream's `created` read first: the
/// fresh read `status` makes, the domain's answer in it, the live
/// stream's `created` and the broker's instant of the read.
pub struct LiveRead {
    pub fresh: crate::tick::Fresh,
    pub answer: crate::floor::Answer,
    pub live_created: crate::rows::Timestamp,
    pub now: chrono::DateTime<chrono::Utc>,
}

/// The memory a gesture's fresh row opens with (`reanchor`, `adopt`): the
/// membership of an answer computed from what the buckets hold now, so
/// that a bucket lost before the next tick lifts no pin the row's
/// predecessor would have kept (docs/trim-floor.md, The sidecar's memory).
#[derive(Debug, Clone)]
pub struct Opened {
    pub record: crate::floor::members::MemoryRecord,
    /// The `_members` values to write before the row (`None`: the keys in
    /// the bucket already hold this membership).
    pub write: Option<std::sync::Arc<crate::floor::remember::MembersWrite>>,
}

impl Opened {
    /// PURE: the memory of `answer`; in a new generation (`reanchor`) the
    /// `applied` and `min_hold` it stood on belong to the last one and are
    /// not kept (a carried node then counts at 0, a carried hold at 1).
    pub fn of(answer: &crate::floor::Answer, new_generation: bool) -> Opened {
        let mut record = answer.memory.clone();
        if new_generation {
            record.applied = None;
            record.min_hold = None;
        }
        Opened {
            record,
            write: answer.members_write.clone(),
        }
    }

    /// APPLY (IO): the `_members` values, before the row that names them.
    pub async fn write(
        &self,
        broker: &crate::broker::Broker,
        bucket: &str,
        stream: &str,
    ) -> Result<(), String> {
        match &self.write {
            Some(w) => crate::tick::write_members(broker, bucket, stream, w).await,
            None => Ok(()),
        }
    }
}

/// FACTS (IO), shared by `reanchor` and `adopt`: one fresh read, and the
/// domain's live stream out of it (no second read); why not, in the
/// broker's words.
pub async fn live_read(
    broker: &crate::broker::Broker,
    config: &crate::config::Config,
    domain: &crate::config::Domain,
) -> Result<LiveRead, String> {
    let now = chrono::Utc::now();
    let fresh = crate::tick::answers(broker, config, "", now).await;
    let now = crate::clock::broker_now(fresh.offset, now);
    let answer = fresh
        .answers
        .iter()
        .find(|a| a.stream == domain.stream)
        .cloned()
        .ok_or_else(|| format!("{} was not read", domain.stream))?;
    if let Some(e) = &answer.stream_error {
        return Err(e.to_string());
    }
    let live_created = answer
        .live_stream_created
        .or(answer.stream_created)
        .ok_or_else(|| format!("stream {} reported no created instant", domain.stream))?;
    Ok(LiveRead {
        fresh,
        answer,
        live_created,
        now,
    })
}

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

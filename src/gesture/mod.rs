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

//! crewlet-retention: a sidecar that coordinates retention for NATS
//! JetStream. It reads what every node, hold, backup, snapshot and feed
//! still needs, computes the trim floor as the minimum of six terms (seven with an archive),
//! publishes it, and only then purges.
//!
//! # Layout
//!
//! Bottom layer first (docs/architecture.md, Layers; a test keeps imports
//! going one way):
//!
//! - Types and pure rules: [`rows`] (the contract's rows and keys, the node
//!   id rule, operation ids), [`config`] (the YAML file: types, parsing,
//!   `validate()` with lines), [`human`] (ages, sizes, serde's words, the
//!   surface a refusal is worded for), [`exit`] (exit codes and the outcome
//!   classes), [`proven`] (`Proven<T>`: only [`broker`] makes one),
//!   [`failpoint`] (fault injection, debug builds only), [`clock`] (the
//!   broker's clock and the skew), [`buckets`] (the contract's buckets),
//!   [`stream_check`] (a stream's own limits judged), [`capacity`] (a new
//!   ceiling judged), and the archive's pure parts ([`archive::state`],
//!   [`archive::cut`], [`archive::segment`]).
//! - Pure judgements: [`floor`] (counted set, the eight terms, trim_to,
//!   blocked_by, the floor, NOT READY), [`gate`] (evictions and
//!   readmissions), [`alarms`], [`report`] (the answer in words).
//! - IO: [`broker`] (the only module that knows async-nats) and the
//!   archive's directory store ([`archive::dir`]).
//! - The tick and the gestures: [`tick`] (one tick and the loop, its
//!   steps, the fresh read every surface shares, and [`tick::duty`]: the
//!   lease and the fence), [`gesture`] (one file per gesture: ack,
//!   set-capacity, erase, evict and readmit, hold, reanchor, explicit
//!   trim), [`preview`] (the gestures judged in memory), [`node`] (the
//!   rows a node writes), [`embedded`] (the
//!   embedded nats-server), and the archive's fold, merge read and
//!   verification ([`archive`]).
//! - The surfaces: [`cli`] and [`http`]; the bench is its own binary
//!   (`bench` feature).
//!
//! See `docs/architecture.md` for the data flow and the invariants.

// Nothing read from the broker, a file or the command line may panic the
// sidecar: outside test code, `unwrap`/`expect`/`panic!` are compile errors
// under `cargo clippy` (CI runs it with -D warnings).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod alarms;
pub mod archive;
/// The performance figures (the `crewlet-bench` binary, `bench` feature).
#[cfg(feature = "bench")]
pub mod bench;
pub mod broker;
pub mod buckets;
pub mod capacity;
pub mod cli;
pub mod clock;
pub mod cloud;
pub mod config;
pub mod conformance;
pub mod embedded;
pub mod exit;
pub mod failpoint;
pub mod floor;
pub mod gate;
pub mod gesture;
pub mod http;
pub mod human;
pub mod node;
pub mod preview;
pub mod proven;
pub mod report;
pub mod rows;
pub mod stream_check;
pub mod tick;
pub mod within;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod seeded;

//! crewlet-retention: a sidecar that coordinates retention for NATS
//! JetStream. It reads what every node, hold, backup, snapshot and feed
//! still needs, computes the trim floor as the minimum of six terms (seven with an archive),
//! publishes it, and only then purges.
//!
//! # Layout
//!
//! - [`config`]: the YAML file: types, named defaults, pure parsing, `validate()` with lines.
//! - [`rows`]: the contract's rows, keys, the node id rule and operation ids (pure).
//! - [`buckets`]: which KV buckets the contract has and how `init` sets them (pure).
//! - [`clock`]: PURE: the broker's clock as the sidecar reads it; the skew.
//! - [`floor`]: PURE: counted set, the seven terms, trim_to, blocked_by, the floor, NOT READY.
//! - [`human`]: ages, sizes and counts for people (pure).
//! - [`stream_check`]: judging a stream's own limits and subjects (pure).
//! - [`broker`]: the only module that knows async-nats: connect, read, create.
//! - [`proven`]: `Proven<T>`, a read checked against the leader; only [`broker`] makes one.
//! - [`failpoint`]: fault injection for the crash and race tests (inert unless set).
//! - [`duty`]: the trim duty lease: claim, renew, fence each purge, release.
//! - [`hold`]: placing a hold with its handshake (create, too_late, confirmed by a later tick).
//! - [`trim`]: one tick (read, absorb, compute, publish, re-read pins, fence, purge) and the loop.
//! - [`cli`]: the clap command tree and one small function per command.
//! - [`exit`]: the exit codes of docs/runbook.md, mapped in one place.
//!
//! See `docs/architecture.md` for the data flow and the invariants.

// Nothing read from the broker, a file or the command line may panic the
// sidecar: outside test code, `unwrap`/`expect`/`panic!` are compile errors
// under `cargo clippy` (CI runs it with -D warnings).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod ack;
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
pub mod config;
pub mod duty;
pub mod embedded;
pub mod erase;
pub mod exit;
pub mod failpoint;
pub mod floor;
pub mod gate;
pub mod gesture;
pub mod hold;
pub mod http;
pub mod human;
pub mod node;
pub mod proven;
pub mod report;
pub mod requested;
pub mod resize;
pub mod rows;
pub mod stream_check;
pub mod trim;

#[cfg(test)]
mod fuzz_tests;

//! The only module that knows async-nats: connecting, and thin readers and
//! writers over streams, consumers and KV buckets. Everything here returns
//! plain data (or a typed error naming what failed) for the pure core.

pub mod archive;
pub mod capacity;
mod connect;
mod door;
pub mod erase;
mod fault;
/// What only the bench builds (the `bench` feature).
#[cfg(feature = "bench")]
pub mod fixture;
pub mod gates;
pub mod http;
pub mod kv;
pub mod lease;
pub mod listing;
mod mark;
pub mod pages;
pub mod read;
pub mod streams;
pub mod view;
pub mod write;

pub use connect::{connect, Broker, ConnectError};
pub use fault::Fault;

/// The log filter for the client library's own lines: none. It logs each
/// refused or failed reconnection at ERROR (53 lines in 3 minutes for one
/// wrong password), which the sidecar's `broker_*` lines, its alarms and
/// `broker_client_error` (at most once a minute) already say
/// (docs/decisions.md, The client library's log lines; `RUST_LOG`
/// overrides it).
pub const CLIENT_LOG_FILTER: &str = "async_nats=off";

/// The log filter's directives: `RUST_LOG` (else `default_level`), with
/// the client library's own lines off unless `RUST_LOG` names the library
/// (`RUST_LOG=async_nats=debug`): a level raised to see the sidecar's own
/// info lines must not bring back a line per refused reconnection.
pub fn log_directives(rust_log: Option<&str>, default_level: &str) -> String {
    match rust_log.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) if v.contains("async_nats") => v.to_string(),
        Some(v) => format!("{v},{CLIENT_LOG_FILTER}"),
        None => format!("{default_level},{CLIENT_LOG_FILTER}"),
    }
}

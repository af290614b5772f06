//! The account's streams as the running tick reads them: the whole
//! listing on the first tick, then only the pages that hold the logs, and
//! the whole listing again in the background every [`RELIST_EVERY`] ticks
//! or as soon as a page shows the account changed. The states a tick
//! purges by always come from its own reads; only what copies each log
//! (alarms, never a pin) may be as old as the last whole listing
//! (docs/decisions.md, Streams the sidecar does not manage).

use std::collections::HashMap;
use std::sync::Arc;

use crate::broker::listing::Listing;
use crate::broker::pages::Index;
use crate::broker::{Broker, Fault};
use crate::clock::Reading;
use crate::floor::StreamState;
use crate::proven::Proven;

/// Ticks between two whole listings of the account (five minutes at the
/// default tick), when no page showed a change sooner.
pub const RELIST_EVERY: u32 = 30;

/// Each log's state as a listing proved it.
pub type States = HashMap<String, Proven<(StreamState, Reading)>>;

/// What the tick keeps of the account's streams between ticks.
#[derive(Debug, Default)]
pub struct AccountStreams {
    index: Option<Arc<Index>>,
    relisting: Option<tokio::task::JoinHandle<Result<Listing, Fault>>>,
    ticks: u32,
}

impl AccountStreams {
    /// This tick's states of `logs` (the ones a page proved; the caller
    /// reads the rest one by one) and the index whose copies it reports
    /// (`None`: the copies are unknown).
    pub async fn read(&mut self, broker: &Broker, logs: &[&str]) -> (States, Option<Arc<Index>>) {
        if self.relisting.as_ref().is_some_and(|r| r.is_finished()) {
            if let Some(relisting) = self.relisting.take() {
                match relisting.await {
                    Ok(Ok(listing)) => self.index = Some(Arc::new(Index::of(listing, logs))),
                    Ok(Err(e)) => {
                        tracing::debug!(event = "relisting_failed", error = %e, "the account's stream listing failed; the next tick tries again");
                    }
                    Err(e) => {
                        tracing::debug!(event = "relisting_failed", error = %e, "the account's stream listing stopped");
                    }
                }
            }
        }
        // A quarter of a read: a listing that hangs leaves the reads after
        // it inside the tick's budget (docs/decisions.md, A fleet of many
        // logs).
        let within = broker.read_timeout() / 4;
        let Some(index) = self.index.clone() else {
            return match broker.listing(logs, within).await {
                Ok(mut listing) => {
                    let states = std::mem::take(&mut listing.states);
                    let index = Arc::new(Index::of(listing, logs));
                    self.index = Some(index.clone());
                    self.ticks = 0;
                    (states, Some(index))
                }
                Err(_) => (States::new(), None),
            };
        };
        self.ticks += 1;
        match broker.listing_pages(logs, &index, within).await {
            Ok(paged) => {
                if paged.stale || self.ticks >= RELIST_EVERY {
                    self.relist(broker, logs);
                }
                (paged.states, Some(index))
            }
            Err(_) => {
                self.relist(broker, logs);
                (States::new(), Some(index))
            }
        }
    }

    /// The whole listing, in the background: a tick never waits for it.
    fn relist(&mut self, broker: &Broker, logs: &[&str]) {
        if self.relisting.is_some() {
            return;
        }
        self.ticks = 0;
        let broker = broker.clone();
        let logs: Vec<String> = logs.iter().map(|l| l.to_string()).collect();
        self.relisting = Some(tokio::spawn(async move {
            let logs: Vec<&str> = logs.iter().map(String::as_str).collect();
            broker.listing(&logs, broker.read_timeout()).await
        }));
    }
}

//! The archive (fold before trim): records leave the live log only after
//! they are durably archived in segments. This module holds the segment
//! format, how a slice is cut, the directory store, one fold into either
//! store, and the archive's state (the seventh term, `archive_floor`).
//! The tick (src/tick/mod.rs) reads each archived domain's archive, folds for
//! the duty holder, and never purges past the frontier.

pub mod cut;
pub mod dir;
pub mod fold;
pub mod merge;
pub mod remote;
pub mod segment;
pub mod state;
pub mod verify;

use crate::broker::Broker;
use fold::{Store, Target};
use state::{ArchiveRead, ArchiveState};

pub use state::Put;

/// The most segments past the published frontier read back in one tick
/// (the rest are adopted by later ticks; none is folded over meanwhile).
pub const VERIFY_PER_TICK: usize = 64;

/// Reads one domain's archive for a tick or `status`: the listing of the
/// current generation, and every segment past the published frontier read
/// back and checked (normally none: the holder publishes what it folds).
/// `prefetched` is the store's whole listing when the caller took it
/// already ([`Store::prefetch`]); `live_from` the log's first sequence, when
/// read, `None` for a fresh listing ([`Store::list_for_tick`]).
pub async fn read(
    broker: &Broker,
    store: &Store,
    target: &Target,
    published: Option<&ArchiveState>,
    prefetched: Option<Result<Vec<state::Listed>, state::ListError>>,
    live_from: Option<u64>,
) -> ArchiveRead {
    let published = published.filter(|p| p.store == store.id());
    let (listing, reused) = store
        .list_for_tick(
            broker,
            (&target.stream, target.generation),
            prefetched,
            published.and_then(|p| p.frontier),
            live_from,
        )
        .await;
    let mut verified = Vec::new();
    if let Ok(l) = &listing {
        for name in state::to_verify(l, published, VERIFY_PER_TICK) {
            let checked = fold::verify(broker, store, target, &name)
                .await
                .map(|_| ())
                .map_err(crate::rows::Unreadable::from);
            let failed = checked.is_err();
            verified.push((name, checked));
            if failed {
                break;
            }
        }
    }
    ArchiveRead {
        store: store.id(),
        listing,
        verified,
        fold: None,
        reused,
    }
}

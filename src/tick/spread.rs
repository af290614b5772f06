//! Pure work spread over the machine's cores. A fleet's answers and row
//! digests are computed from what the tick has already read, each log on
//! its own, and they were half a quiet tick's time at 1,000 logs on one
//! core (docs/decisions.md, Streams the sidecar does not manage).
//! Nothing here does IO: it is scoped threads over a function of an
//! index.

/// Fewer items than this per thread are done where the caller runs: a
/// thread costs more than the work it would take.
const MIN_PER_THREAD: usize = 64;

/// At most this many threads, the caller's included: the sidecar runs
/// beside nats-server, which needs its cores more.
const MAX_THREADS: usize = 4;

/// `f(0)`, …, `f(n - 1)` in order, in chunks on up to [`MAX_THREADS`]
/// threads. A thread the system will not start leaves its chunk to the
/// caller; a panic in one is the caller's panic, as it would have been
/// without threads.
pub fn map<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get());
    let chunks = cores.min(MAX_THREADS).min(n / MIN_PER_THREAD).max(1);
    if chunks == 1 {
        return (0..n).map(f).collect();
    }
    let size = n.div_ceil(chunks);
    let f = &f;
    std::thread::scope(|s| {
        let started: Vec<(usize, Option<std::thread::ScopedJoinHandle<'_, Vec<R>>>)> = (1..chunks)
            .map(|c| {
                let range = c * size..((c + 1) * size).min(n);
                let handle = std::thread::Builder::new()
                    .name("crewlet-spread".into())
                    .spawn_scoped(s, move || range.map(f).collect::<Vec<R>>())
                    .ok();
                (c, handle)
            })
            .collect();
        let mut out: Vec<R> = (0..size.min(n)).map(f).collect();
        for (c, handle) in started {
            match handle.map(|h| h.join()) {
                Some(Ok(part)) => out.extend(part),
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                None => out.extend((c * size..((c + 1) * size).min(n)).map(f)),
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_once_and_in_order_at_any_size() {
        for n in [0, 1, 63, 64, 127, 128, 129, 1000, 1001] {
            let out = map(n, |i| i * 3);
            assert_eq!(out, (0..n).map(|i| i * 3).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn a_panic_in_a_chunk_is_the_callers() {
        let caught = std::panic::catch_unwind(|| {
            map(1000, |i| {
                assert!(i != 900, "the item at 900");
                i
            })
        });
        assert!(caught.is_err());
    }
}

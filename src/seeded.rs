//! The property tests' runner settings: every run draws from a fixed seed
//! unless told otherwise, so a run passes or fails the same way each time
//! (CI included), and a case that fails is kept under
//! `proptest-regressions/` to be tried first on every later run
//! (docs/testing.md, Seeds: every run the same). `PROPTEST_RNG_SEED=N` replays
//! another seed; `CREWLET_PROPTEST_RANDOM=1` draws a fresh one (the long
//! exploratory mode, with `CREWLET_FUZZ_CASES` for the parsers' count).

use proptest::test_runner::{Config, RngSeed};

/// The seed every run draws from unless told otherwise.
pub const SEED: u64 = 20_261_203;

/// `cases` cases from [`SEED`] (proptest's own `PROPTEST_*` variables
/// still apply).
pub fn config(cases: u32) -> Config {
    let mut c = Config {
        cases,
        ..Config::default()
    };
    let chosen = std::env::var_os("PROPTEST_RNG_SEED").is_some()
        || std::env::var_os("CREWLET_PROPTEST_RANDOM").is_some();
    if !chosen {
        c.rng_seed = RngSeed::Fixed(SEED);
    }
    c
}

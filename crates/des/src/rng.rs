//! Seeded random streams: one per component, so adding a draw in one model does not shift
//! the numbers another model sees.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A deterministic random stream (ChaCha8: fast, and the same sequence on every platform).
pub type Stream = ChaCha8Rng;

/// Stream number `id` of the run seeded with `seed`.
pub fn stream(seed: u64, id: u64) -> Stream {
    let mut s = ChaCha8Rng::seed_from_u64(seed);
    s.set_stream(id);
    s
}

/// An exponentially distributed duration with the given mean (inverse transform).
pub fn exponential(rng: &mut Stream, mean: f64) -> f64 {
    // 1 - u is in (0, 1], so the logarithm is finite.
    let u: f64 = rng.random();
    -(1.0 - u).ln() * mean
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_repeat_for_a_seed_and_differ_between_ids() {
        let draw = |seed, id| -> Vec<u64> {
            let mut s = stream(seed, id);
            (0..4).map(|_| s.random()).collect()
        };
        assert_eq!(draw(7, 1), draw(7, 1));
        assert_ne!(draw(7, 1), draw(7, 2));
        assert_ne!(draw(7, 1), draw(8, 1));
    }

    #[test]
    fn exponential_draws_have_the_mean_asked_for() {
        let mut s = stream(1, 0);
        let n = 200_000;
        let mean = (0..n).map(|_| exponential(&mut s, 5.0)).sum::<f64>() / n as f64;
        assert!((mean - 5.0).abs() < 0.05, "mean {mean}");
    }
}

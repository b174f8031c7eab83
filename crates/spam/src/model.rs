//! The Bayes classifier: a model of token counts per class, trained from messages a user
//! filed as spam or ham, and the probability that a message is spam (docs/spam.md 2 and 3).
//!
//! The probability is Gary Robinson's, as SpamBayes computes it ("A Statistical Approach to
//! the Spam Problem", Linux Journal 107, 2003; SpamBayes `classifier.py`): each token's
//! smoothed spam probability f(w), the most telling of them combined by Fisher's method
//! (inverse chi-square) into an indication that is near 1 for spam, near 0 for ham and near
//! 0.5 when the evidence is absent or contradicts itself.

use std::collections::HashMap;

/// A model's counts by token hash. The hashes are SipHash outputs already, but under public
/// keys: the map's own hasher is keyed per process (foldhash, several times cheaper than
/// std's SipHash on a `u64`), so mail trained into a model cannot be crafted to collide in it.
pub type TokenCounts = HashMap<u64, Counts, foldhash::fast::RandomState>;
use std::str::FromStr;

/// Robinson's s, the strength of the prior: how many messages' worth of evidence the
/// assumed probability x counts as. SpamBayes' default (`unknown_word_strength`).
pub const UNKNOWN_WORD_STRENGTH: f64 = 0.45;
/// Robinson's x, the probability assumed for a token never seen (`unknown_word_prob`).
pub const UNKNOWN_WORD_PROBABILITY: f64 = 0.5;
/// A token whose f(w) is closer than this to 0.5 tells nothing and is left out
/// (`minimum_prob_strength`).
pub const PROBABILITY_STRENGTH_MIN: f64 = 0.1;
/// At most this many tokens, the most telling, are combined (`max_discriminators`).
pub const DISCRIMINATORS_MAX: usize = 150;

/// How many spam and ham messages were counted (for a token: how many of each held it).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Counts {
    pub spam: u32,
    pub ham: u32,
}

impl Counts {
    fn get_mut(&mut self, class: Class) -> &mut u32 {
        match class {
            Class::Spam => &mut self.spam,
            Class::Ham => &mut self.ham,
        }
    }

    /// `spam + ham`, without overflow.
    pub fn total(&self) -> u64 {
        u64::from(self.spam) + u64::from(self.ham)
    }
}

/// What a message was trained as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Spam,
    Ham,
}

impl Class {
    /// `spam` or `ham`: the stored and logged name.
    pub fn name(&self) -> &'static str {
        match self {
            Class::Spam => "spam",
            Class::Ham => "ham",
        }
    }

    /// The other class.
    pub fn other(&self) -> Class {
        match self {
            Class::Spam => Class::Ham,
            Class::Ham => Class::Spam,
        }
    }
}

impl FromStr for Class {
    type Err = String;

    fn from_str(s: &str) -> Result<Class, String> {
        match s {
            "spam" => Ok(Class::Spam),
            "ham" => Ok(Class::Ham),
            other => Err(format!("unknown class {other:?} (expected spam or ham)")),
        }
    }
}

/// A classifier's memory: how many messages of each class it was trained on, and for each
/// token hash ([`crate::tokenize`]) how many of those held it. Tokens are never 0/0.
#[derive(Clone, Default, Debug)]
pub struct Model {
    pub messages: Counts,
    pub tokens: TokenCounts,
}

impl Model {
    /// Whether the model was trained on at least `messages_min` spam and as many ham
    /// messages (docs/spam.md 2, `bayes_messages_min`): before that, its probabilities are
    /// noise.
    pub fn is_mature(&self, messages_min: u32) -> bool {
        self.messages.spam >= messages_min && self.messages.ham >= messages_min
    }

    /// The probability that a message with these tokens is spam, in [0, 1]; 0.5 when no
    /// token is telling (an empty or untrained model, or unknown words only).
    pub fn probability(&self, tokens: &[u64]) -> f64 {
        let mut clues: Vec<f64> = tokens
            .iter()
            .filter_map(|token| self.tokens.get(token))
            .map(|counts| self.token_probability(*counts))
            .filter(|f| (f - 0.5).abs() >= PROBABILITY_STRENGTH_MIN)
            .collect();
        if clues.len() > DISCRIMINATORS_MAX {
            // The most telling first; among equals the order does not matter, the values
            // being equal.
            clues.select_nth_unstable_by(DISCRIMINATORS_MAX, |a, b| {
                (b - 0.5).abs().total_cmp(&(a - 0.5).abs())
            });
            clues.truncate(DISCRIMINATORS_MAX);
        }
        combine(&clues)
    }

    /// Robinson's f(w) of a token with these counts: its spam probability from the two
    /// classes' frequencies (so that training more spam than ham does not bias it), pulled
    /// toward x by the prior of strength s: `(s * x + n * p) / (s + n)`.
    pub fn token_probability(&self, counts: Counts) -> f64 {
        let frequency = |count: u32, messages: u32| {
            if messages == 0 {
                0.0
            } else {
                (f64::from(count) / f64::from(messages)).min(1.0)
            }
        };
        let spam = frequency(counts.spam, self.messages.spam);
        let ham = frequency(counts.ham, self.messages.ham);
        if spam + ham == 0.0 {
            return UNKNOWN_WORD_PROBABILITY;
        }
        let p = spam / (spam + ham);
        let n = counts.total() as f64;
        let s = UNKNOWN_WORD_STRENGTH;
        (s * UNKNOWN_WORD_PROBABILITY + n * p) / (s + n)
    }

    /// Counts one message of `class` holding `tokens` (each distinct, as `tokenize` gives
    /// them). Counts saturate rather than wrap.
    pub fn train(&mut self, tokens: &[u64], class: Class) {
        let messages = self.messages.get_mut(class);
        *messages = messages.saturating_add(1);
        for &token in tokens {
            let count = self.tokens.entry(token).or_default().get_mut(class);
            *count = count.saturating_add(1);
        }
    }

    /// Takes back one message of `class` holding `tokens`: the reverse of [`Model::train`],
    /// counts stopping at 0, tokens left at 0/0 removed.
    pub fn untrain(&mut self, tokens: &[u64], class: Class) {
        let messages = self.messages.get_mut(class);
        *messages = messages.saturating_sub(1);
        for token in tokens {
            if let Some(counts) = self.tokens.get_mut(token) {
                let count = counts.get_mut(class);
                *count = count.saturating_sub(1);
                if counts.total() == 0 {
                    self.tokens.remove(token);
                }
            }
        }
    }

    /// Bounds the model (docs/spam.md 3, `bayes_tokens_max`): when it holds more than
    /// `tokens_max` tokens, removes the least seen (smallest spam + ham; among equals the
    /// smallest hash, so the result does not depend on the map's order) until 90% of
    /// `tokens_max` remain, and returns the removed ones. The margin makes pruning rare:
    /// once per 10% of growth, not at every message.
    pub fn prune(&mut self, tokens_max: usize) -> Vec<u64> {
        if self.tokens.len() <= tokens_max {
            return Vec::new();
        }
        let keep = tokens_max - tokens_max / 10;
        let mut by_use: Vec<(u64, u64)> = self
            .tokens
            .iter()
            .map(|(&token, counts)| (counts.total(), token))
            .collect();
        let remove = by_use.len() - keep;
        if remove < by_use.len() {
            by_use.select_nth_unstable(remove);
        }
        let removed: Vec<u64> = by_use[..remove].iter().map(|&(_, token)| token).collect();
        for token in &removed {
            self.tokens.remove(token);
        }
        self.tokens.shrink_to(self.tokens.len() * 8 / 7 + 1);
        removed
    }

    /// The heap the model holds, in bytes: its map's table as std's hashbrown lays it out
    /// (a power-of-two number of buckets, at most 7/8 full, each a key, a value and a control
    /// byte, plus one group of control bytes).
    pub fn memory_bytes(&self) -> usize {
        let capacity = self.tokens.capacity();
        if capacity == 0 {
            return 0;
        }
        let buckets = if capacity < 8 {
            (capacity + 1).next_power_of_two()
        } else {
            (capacity * 8 / 7).next_power_of_two()
        };
        const GROUP_WIDTH: usize = 16;
        buckets * (size_of::<(u64, Counts)>() + 1) + GROUP_WIDTH
    }
}

/// Fisher's combination of the clues f(w) (SpamBayes `chi2_spamprob`): H, how strongly the
/// clues say ham, and S, spam, each 1 - the chi-square survival of -2 ln of their product;
/// the indication is (1 + S - H) / 2.
fn combine(clues: &[f64]) -> f64 {
    if clues.is_empty() {
        return 0.5;
    }
    // Sums of logarithms rather than products: 150 clues near 0 underflow a product.
    // Each f(w) is in (0, 1): the prior keeps it off both ends for any finite count.
    let ln_ham: f64 = clues.iter().map(|f| f.max(f64::MIN_POSITIVE).ln()).sum();
    let ln_spam: f64 = clues
        .iter()
        .map(|f| (1.0 - f).max(f64::MIN_POSITIVE).ln())
        .sum();
    let degrees = 2 * clues.len();
    let spam = 1.0 - chi2_survival(-2.0 * ln_spam, degrees);
    let ham = 1.0 - chi2_survival(-2.0 * ln_ham, degrees);
    let indication = (1.0 + spam - ham) / 2.0;
    if indication.is_nan() {
        0.5
    } else {
        indication.clamp(0.0, 1.0)
    }
}

/// The probability that a chi-square variable with `degrees` (even) degrees of freedom is at
/// least `x2`: the series `e^-m * sum(m^i / i!)` for i below degrees/2, m = x2/2.
fn chi2_survival(x2: f64, degrees: usize) -> f64 {
    let m = x2 / 2.0;
    let mut term = (-m).exp();
    let mut sum = term;
    for i in 1..degrees / 2 {
        term *= m / i as f64;
        sum += term;
    }
    sum.min(1.0)
}

#[cfg(test)]
mod tests;

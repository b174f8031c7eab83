//! The classifier's quality and cost on the synthetic corpus (docs/benchmarks.md):
//!
//! ```text
//! cargo run -p spam --release --features corpus --example quality [seed]
//! ```
//!
//! Trains a model on half of 4,000 generated messages and classifies the other half the way
//! the verdict does with Bayes as its only evidence: spam when the score reaches the default
//! junk threshold (BAYES_99 or BAYES_999, a probability of at least 0.99). Then the model's
//! size after 10,000 messages, and the throughput of `tokenize` and `probability`.

use std::time::Instant;

use spam::{Class, Evidence, Model, Thresholds, TokenLimits, Weights, corpus, score, tokenize};

const MESSAGES: usize = 4000;
const MESSAGES_FOR_SIZE: usize = 10_000;

fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let limits = TokenLimits::default();
    let thresholds = Thresholds::default();
    let weights = Weights::default();

    let messages = corpus::generate(seed, MESSAGES);
    let bytes: usize = messages.iter().map(|(_, m)| m.len()).sum();
    let started = Instant::now();
    let tokenized: Vec<(Class, Vec<u64>)> = messages
        .iter()
        .map(|(class, message)| (*class, tokenize(message, &limits)))
        .collect();
    let tokenize_seconds = started.elapsed().as_secs_f64();

    let (train, test) = tokenized.split_at(MESSAGES / 2);
    let mut model = Model::default();
    for (class, tokens) in train {
        model.train(tokens, *class);
    }
    let started = Instant::now();
    let probabilities: Vec<f64> = test
        .iter()
        .map(|(_, tokens)| model.probability(tokens))
        .collect();
    let probability_seconds = started.elapsed().as_secs_f64();

    let (mut true_positive, mut false_positive, mut false_negative, mut true_negative) =
        (0u32, 0u32, 0u32, 0u32);
    let mut bands: Vec<(String, u32, u32)> = Vec::new();
    for ((class, _), probability) in test.iter().zip(&probabilities) {
        let evidence = Evidence {
            bayes: Some(*probability),
            ..Evidence::default()
        };
        let verdict = score(&evidence, &weights);
        let junk = verdict.points >= thresholds.junk;
        let spam = *class == Class::Spam;
        match (spam, junk) {
            (true, true) => true_positive += 1,
            (false, true) => false_positive += 1,
            (true, false) => false_negative += 1,
            (false, false) => true_negative += 1,
        }
        let band = verdict
            .reasons
            .iter()
            .find(|r| r.name.starts_with("BAYES_"))
            .map_or("BAYES_50".to_string(), |r| r.name.clone());
        match bands.iter_mut().find(|(name, _, _)| *name == band) {
            Some((_, s, h)) => *if spam { s } else { h } += 1,
            None => bands.push((band, u32::from(spam), u32::from(!spam))),
        }
    }
    const ORDER: [&str; 8] = [
        "BAYES_00",
        "BAYES_05",
        "BAYES_20",
        "BAYES_50",
        "BAYES_80",
        "BAYES_95",
        "BAYES_99",
        "BAYES_999",
    ];
    bands.sort_by_key(|(name, _, _)| ORDER.iter().position(|o| o == name));

    let mut sized = Model::default();
    for (class, message) in corpus::generate(seed.wrapping_add(1), MESSAGES_FOR_SIZE) {
        sized.train(&tokenize(&message, &limits), class);
    }

    let large = large_message();
    let started = Instant::now();
    let rounds = 20;
    for _ in 0..rounds {
        std::hint::black_box(tokenize(&large, &limits));
    }
    let large_ms = started.elapsed().as_secs_f64() * 1000.0 / f64::from(rounds);

    let ratio = |a: u32, b: u32| {
        if b == 0 {
            0.0
        } else {
            f64::from(a) / f64::from(b)
        }
    };
    let spam_count = true_positive + false_negative;
    let ham_count = false_positive + true_negative;
    println!("spam classifier on the synthetic corpus (seed {seed})");
    println!(
        "trained on {} messages, tested on {} ({spam_count} spam, {ham_count} ham)",
        train.len(),
        test.len()
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| precision (junk at score >= {:.1}: BAYES_99, BAYES_999) | {:.4} |",
        thresholds.junk,
        ratio(true_positive, true_positive + false_positive)
    );
    println!("| recall | {:.4} |", ratio(true_positive, spam_count));
    println!(
        "| false-positive rate | {:.4} ({false_positive} of {ham_count} ham) |",
        ratio(false_positive, ham_count)
    );
    println!("| missed spam | {false_negative} of {spam_count} |");
    println!(
        "| model after {MESSAGES_FOR_SIZE} messages: tokens | {} |",
        sized.tokens.len()
    );
    println!(
        "| model after {MESSAGES_FOR_SIZE} messages: memory_bytes | {} ({:.1} MiB) |",
        sized.memory_bytes(),
        sized.memory_bytes() as f64 / (1024.0 * 1024.0)
    );
    println!(
        "| tokenize | {:.0} messages/s ({:.1} MB/s, mean {} bytes, {:.0} tokens) |",
        MESSAGES as f64 / tokenize_seconds,
        bytes as f64 / tokenize_seconds / 1e6,
        bytes / MESSAGES,
        tokenized.iter().map(|(_, t)| t.len()).sum::<usize>() as f64 / MESSAGES as f64
    );
    println!(
        "| probability | {:.0} messages/s |",
        test.len() as f64 / probability_seconds
    );
    println!(
        "| tokenize a {:.1} MiB message (1 MiB of text, then an attachment) | {large_ms:.1} ms |",
        large.len() as f64 / (1024.0 * 1024.0)
    );
    println!();
    println!("| band | spam | ham |");
    println!("|---|---|---|");
    for (name, spam, ham) in &bands {
        println!("| {name} | {spam} | {ham} |");
    }
}

/// The worst case the bounds allow: a text part far over `text_bytes_max`, of 512 words
/// repeated (so that the token bound never ends the reading early), then a large base64
/// attachment.
fn large_message() -> Vec<u8> {
    let mut message = b"From: a@example.com\r\nSubject: large\r\n\
        Content-Type: multipart/mixed; boundary=b\r\n\r\n\
        --b\r\nContent-Type: text/plain\r\n\r\n"
        .to_vec();
    let mut state = 1u64;
    while message.len() < 1024 * 1024 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        message.extend_from_slice(format!("w{:x} ", state >> 55).as_bytes());
    }
    message.extend_from_slice(
        b"\r\n--b\r\nContent-Type: application/zip\r\n\
          Content-Transfer-Encoding: base64\r\n\r\n",
    );
    while message.len() < 3 * 1024 * 1024 {
        message.extend_from_slice(b"UEsDBBQAAAAIAAAAIQBQSwMEFAAAAAgAAAAhAFBLAwQUAAAACAAAACEA\r\n");
    }
    message.extend_from_slice(b"--b--\r\n");
    message
}

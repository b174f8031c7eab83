//! Properties: nothing that reads a message panics, whatever its bytes; stripping our fields
//! leaves no verdict; training is reversible; probabilities are probabilities; pruning
//! bounds the model.

use proptest::collection::vec;
use proptest::prelude::*;
use spam::{
    Class, Counts, Model, TokenLimits, digest, from_address, gtube, link_domains, status_of,
    strip_status_fields, tokenize,
};

use crate::samples::SAMPLES;

/// Every reader of messages, on one message: none may panic.
fn read_everything(message: &[u8]) {
    let limits = TokenLimits {
        text_bytes_max: 4096,
        tokens_max: 300,
    };
    let tokens = tokenize(message, &limits);
    assert!(tokens.len() <= limits.tokens_max);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]));
    tokenize(message, &TokenLimits::default());
    let stripped = strip_status_fields(message);
    assert_eq!(status_of(&stripped), None);
    status_of(message);
    assert!(link_domains(message, 5).len() <= 5);
    gtube(message);
    from_address(message);
    digest(message);
}

/// A mutation of a message: a byte replaced, inserted or removed at a position.
fn mutate(sample: &[u8], edits: &[(usize, u8, u8)], keep: usize) -> Vec<u8> {
    let mut message = sample.to_vec();
    for &(at, byte, kind) in edits {
        let at = at % (message.len() + 1);
        match kind {
            0 if at < message.len() => message[at] = byte,
            1 => message.insert(at, byte),
            _ if at < message.len() => {
                message.remove(at);
            }
            _ => {}
        }
    }
    message.truncate(keep % (message.len() + 1) + message.len() / 2);
    message
}

/// Header field names that are ours, in any case.
fn our_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("X-Spam-Status"),
        Just("X-Spam-Score"),
        Just("X-Spam-Flag"),
        Just("x-spam-score"),
        Just("X-SPAM-FLAG"),
    ]
    .prop_map(str::to_string)
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(message in vec(any::<u8>(), 0..4096)) {
        read_everything(&message);
    }

    #[test]
    fn header_like_bytes_never_panic(
        lines in vec("[A-Za-z-]{0,12}:[ -~\t]{0,40}|[ \t][ -~]{0,30}|", 0..30),
        body in "[ -~\r\n<>&;=]{0,400}",
    ) {
        let message = format!("{}\r\n\r\n{body}", lines.join("\r\n"));
        read_everything(message.as_bytes());
    }

    #[test]
    fn mutated_messages_never_panic(
        sample in 0..SAMPLES.len(),
        edits in vec((any::<usize>(), any::<u8>(), 0u8..3), 0..24),
        keep in any::<usize>(),
    ) {
        read_everything(&mutate(SAMPLES[sample], &edits, keep));
    }

    #[test]
    fn stripped_messages_carry_no_verdict(
        fields in vec((our_name(), "[ -~]{0,20}", prop::bool::ANY), 0..6),
        others in vec("[A-Za-z]{1,10}: [ -~]{0,20}", 0..6),
        body in "[ -~\r\n]{0,200}",
    ) {
        let mut header = String::new();
        for (i, (name, value, folded)) in fields.iter().enumerate() {
            header.push_str(&format!("{name}: {value}\r\n"));
            if *folded {
                header.push_str("\tcontinued\r\n");
            }
            if let Some(other) = others.get(i) {
                header.push_str(other);
                header.push_str("\r\n");
            }
        }
        let message = format!("{header}\r\nX-Spam-Score: 3\r\n{body}");
        let stripped = strip_status_fields(message.as_bytes());
        prop_assert_eq!(status_of(&stripped), None);
        // Only our fields went: the other fields and the body are all still there.
        let text = String::from_utf8_lossy(&stripped).into_owned();
        for other in &others[..others.len().min(fields.len())] {
            prop_assert!(text.contains(other.as_str()));
        }
        let tail = format!("\r\nX-Spam-Score: 3\r\n{body}");
        prop_assert!(text.ends_with(&tail), "the body is untouched");
    }

    #[test]
    fn train_then_untrain_restores_the_model(
        history in vec((vec(0u64..64, 0..20), prop::bool::ANY), 0..20),
        tokens in vec(0u64..80, 0..30),
        spam in prop::bool::ANY,
    ) {
        let class = |spam: bool| if spam { Class::Spam } else { Class::Ham };
        let mut model = Model::default();
        for (tokens, spam) in &history {
            model.train(tokens, class(*spam));
        }
        let before = model.clone();
        model.train(&tokens, class(spam));
        model.untrain(&tokens, class(spam));
        prop_assert_eq!(model.messages, before.messages);
        prop_assert_eq!(&model.tokens, &before.tokens);
        prop_assert!(model.tokens.values().all(|c| c.total() > 0));
    }

    #[test]
    fn probability_is_a_probability(
        messages in (any::<u32>(), any::<u32>()),
        counts in vec((0u64..400, any::<u32>(), any::<u32>()), 0..300),
        small in vec((0u64..400, 0u32..5, 0u32..5), 0..300),
        tokens in vec(0u64..400, 0..400),
    ) {
        for counts in [counts, small] {
            let model = Model {
                messages: Counts { spam: messages.0 % 7, ham: messages.1 },
                tokens: counts
                    .iter()
                    .map(|&(token, spam, ham)| (token, Counts { spam, ham }))
                    .collect(),
            };
            let p = model.probability(&tokens);
            prop_assert!((0.0..=1.0).contains(&p), "{}", p);
        }
    }

    #[test]
    fn prune_bounds_the_model(
        tokens in vec((any::<u64>(), 1u32..50), 0..500),
        tokens_max in 0usize..600,
    ) {
        let mut model = Model::default();
        for &(token, times) in &tokens {
            model.tokens.insert(token, Counts { spam: times, ham: 0 });
        }
        let before = model.tokens.clone();
        let removed = model.prune(tokens_max);
        prop_assert!(model.tokens.len() <= tokens_max);
        prop_assert_eq!(removed.len() + model.tokens.len(), before.len());
        if before.len() <= tokens_max {
            prop_assert!(removed.is_empty());
        } else {
            prop_assert_eq!(model.tokens.len(), tokens_max - tokens_max / 10);
            let least_kept = model.tokens.values().map(Counts::total).min().unwrap_or(u64::MAX);
            for token in &removed {
                prop_assert!(before[token].total() <= least_kept);
            }
        }
    }
}

#[test]
fn the_samples_are_read() {
    for sample in SAMPLES {
        read_everything(sample);
        assert!(tokenize(sample, &TokenLimits::default()).len() > 10);
    }
    assert!(status_of(SAMPLES[3]).is_some_and(|s| s.flagged && s.score == 7.5));
}

use super::*;

fn trained(spam: &[&[u64]], ham: &[&[u64]]) -> Model {
    let mut model = Model::default();
    for tokens in spam {
        model.train(tokens, Class::Spam);
    }
    for tokens in ham {
        model.train(tokens, Class::Ham);
    }
    model
}

#[test]
fn class_names_round_trip() {
    for class in [Class::Spam, Class::Ham] {
        assert_eq!(class.name().parse::<Class>(), Ok(class));
        assert_eq!(class.other().other(), class);
    }
    assert!("Spam".parse::<Class>().is_err());
}

#[test]
fn maturity_needs_both_classes() {
    let model = trained(&[&[1], &[2]], &[&[3]]);
    assert!(model.is_mature(1));
    assert!(!model.is_mature(2));
    assert!(Model::default().is_mature(0));
}

#[test]
fn nothing_telling_is_one_half() {
    assert_eq!(Model::default().probability(&[1, 2, 3]), 0.5);
    let model = trained(&[&[1, 9]], &[&[2, 9]]);
    assert_eq!(model.probability(&[]), 0.5);
    // Unknown tokens and tokens seen equally in both classes tell nothing.
    assert_eq!(model.probability(&[9, 100]), 0.5);
}

#[test]
fn token_probability_is_robinsons() {
    let model = trained(&[&[1], &[1], &[2]], &[&[2], &[3]]);
    // Token 1: in 2 of 3 spam, 0 of 2 ham: p = 1, n = 2, f = (0.45 * 0.5 + 2) / 2.45.
    let f = model.token_probability(model.tokens[&1]);
    assert!((f - (0.225 + 2.0) / 2.45).abs() < 1e-12, "{f}");
    // Token 2: 1/3 spam, 1/2 ham: p = (1/3) / (1/3 + 1/2) = 0.4, n = 2.
    let f = model.token_probability(model.tokens[&2]);
    assert!((f - (0.225 + 0.8) / 2.45).abs() < 1e-12, "{f}");
}

#[test]
fn spam_tokens_say_spam_and_ham_tokens_ham() {
    let spam: Vec<Vec<u64>> = (0..20).map(|i| vec![1, 2, 3, 100 + i]).collect();
    let ham: Vec<Vec<u64>> = (0..20).map(|i| vec![4, 5, 6, 200 + i]).collect();
    let mut model = Model::default();
    for tokens in &spam {
        model.train(tokens, Class::Spam);
    }
    for tokens in &ham {
        model.train(tokens, Class::Ham);
    }
    assert!(model.probability(&[1, 2, 3]) > 0.99);
    assert!(model.probability(&[4, 5, 6]) < 0.01);
    let mixed = model.probability(&[1, 2, 3, 4, 5, 6]);
    assert!(
        (mixed - 0.5).abs() < 0.01,
        "contradicting evidence is unsure: {mixed}"
    );
}

#[test]
fn at_most_the_most_telling_tokens_count() {
    // 200 weak spam tokens (seen in 1 of 10 spam, 0 ham) against 150 strong ham tokens:
    // only the 150 most telling are combined, and those are the ham ones.
    let mut model = Model::default();
    let weak: Vec<u64> = (0..200).collect();
    let strong: Vec<u64> = (1000..1150).collect();
    model.train(&weak, Class::Spam);
    for _ in 0..9 {
        model.train(&[5000], Class::Spam);
    }
    for _ in 0..10 {
        model.train(&strong, Class::Ham);
    }
    let tokens: Vec<u64> = weak.iter().chain(&strong).copied().collect();
    assert!(model.probability(&tokens) < 0.01);
}

#[test]
fn train_and_untrain_are_inverse_and_saturate() {
    let mut model = trained(&[&[1, 2]], &[&[2, 3]]);
    let before = model.clone();
    model.train(&[2, 4], Class::Spam);
    model.untrain(&[2, 4], Class::Spam);
    assert_eq!(model.messages, before.messages);
    assert_eq!(model.tokens, before.tokens);
    // Untraining what was never trained stops at zero and leaves no 0/0 token.
    model.untrain(&[1, 7], Class::Ham);
    model.untrain(&[1, 7], Class::Ham);
    assert_eq!(model.messages, Counts { spam: 1, ham: 0 });
    assert_eq!(model.tokens.get(&1), Some(&Counts { spam: 1, ham: 0 }));
    model.untrain(&[1], Class::Spam);
    assert!(!model.tokens.contains_key(&1));
    assert!(!model.tokens.contains_key(&7));
    let mut full = Model::default();
    full.messages.spam = u32::MAX;
    full.tokens.insert(
        1,
        Counts {
            spam: u32::MAX,
            ham: 0,
        },
    );
    full.train(&[1], Class::Spam);
    assert_eq!(full.messages.spam, u32::MAX);
    assert_eq!(full.tokens[&1].spam, u32::MAX);
}

#[test]
fn prune_removes_the_least_seen_down_to_ninety_percent() {
    let mut model = Model::default();
    for token in 0..100u64 {
        for _ in 0..=token % 10 {
            model.train(&[token], Class::Ham);
        }
    }
    assert!(model.prune(100).is_empty(), "not over the bound");
    let removed = model.prune(50);
    assert_eq!(model.tokens.len(), 45);
    assert_eq!(removed.len(), 55);
    let least_kept = model.tokens.values().map(Counts::total).min().unwrap_or(0);
    for token in &removed {
        assert!(
            token % 10 < least_kept,
            "{token} removed before a less seen one"
        );
        assert!(!model.tokens.contains_key(token));
    }
    assert_eq!(model.prune(0).len(), 45);
    assert!(model.tokens.is_empty());
}

#[test]
fn memory_bytes_grows_with_the_table() {
    assert_eq!(Model::default().memory_bytes(), 0);
    let mut model = Model::default();
    let tokens: Vec<u64> = (0..10_000).collect();
    model.train(&tokens, Class::Spam);
    let bytes = model.memory_bytes();
    // 10,000 entries of 16 bytes and a control byte, in at most twice as many buckets.
    assert!(bytes >= 10_000 * 17, "{bytes}");
    assert!(bytes <= 2 * 16_384 * 17 + 16, "{bytes}");
    assert_eq!(
        bytes,
        16_384 * 17 + 16,
        "hashbrown: 10,000 at 7/8 load is 16,384 buckets"
    );
}

#[test]
fn chi2_survival_known_values() {
    // 2 degrees of freedom: Q(x) = e^(-x/2).
    assert!((chi2_survival(2.0, 2) - (-1.0f64).exp()).abs() < 1e-12);
    assert_eq!(chi2_survival(0.0, 10), 1.0);
    assert!(chi2_survival(1e6, 300) < 1e-300);
}

//! The classifier on the synthetic corpus: trained on one part, it separates the held-out
//! spam from the ham as the verdict would use it (docs/spam.md 2: junk from BAYES_99 on).

use spam::{Class, Evidence, Model, Thresholds, TokenLimits, Weights, corpus, score, tokenize};

/// Precision and recall of junk-by-Bayes-alone on `test` after training on `train`.
fn precision_recall(model: &Model, test: &[(Class, Vec<u64>)]) -> (f64, f64) {
    let (mut caught, mut flagged, mut spam) = (0u32, 0u32, 0u32);
    for (class, tokens) in test {
        let evidence = Evidence {
            bayes: Some(model.probability(tokens)),
            ..Evidence::default()
        };
        let junk = score(&evidence, &Weights::default()).points >= Thresholds::default().junk;
        flagged += u32::from(junk);
        spam += u32::from(*class == Class::Spam);
        caught += u32::from(junk && *class == Class::Spam);
    }
    (
        f64::from(caught) / f64::from(flagged.max(1)),
        f64::from(caught) / f64::from(spam.max(1)),
    )
}

fn tokenized(seed: u64, count: usize) -> Vec<(Class, Vec<u64>)> {
    corpus::generate(seed, count)
        .iter()
        .map(|(class, message)| (*class, tokenize(message, &TokenLimits::default())))
        .collect()
}

#[test]
fn a_trained_model_separates_held_out_spam_and_ham() {
    let messages = tokenized(42, 2400);
    let (train, test) = messages.split_at(1200);
    let mut model = Model::default();
    for (class, tokens) in train {
        model.train(tokens, *class);
    }
    assert!(model.is_mature(400));
    let (precision, recall) = precision_recall(&model, test);
    assert!(precision > 0.95, "precision {precision}");
    assert!(recall > 0.8, "recall {recall}");
    // An untrained model says nothing: no message is junk.
    let (_, recall) = precision_recall(&Model::default(), test);
    assert_eq!(recall, 0.0);
}

#[test]
fn a_pruned_model_still_separates() {
    let messages = tokenized(7, 2400);
    let (train, test) = messages.split_at(1200);
    let mut model = Model::default();
    for (class, tokens) in train {
        model.train(tokens, *class);
    }
    let tokens_max = model.tokens.len() / 4;
    model.prune(tokens_max);
    assert!(model.tokens.len() <= tokens_max);
    let (precision, recall) = precision_recall(&model, test);
    assert!(precision > 0.95, "precision {precision}");
    assert!(recall > 0.8, "recall {recall}");
}

#[test]
fn training_on_mislabelled_mail_hurts_so_the_test_can_fail() {
    // The same corpus trained with the labels swapped: the held-out spam looks like ham.
    let messages = tokenized(42, 1200);
    let (train, test) = messages.split_at(600);
    let mut model = Model::default();
    for (class, tokens) in train {
        model.train(tokens, class.other());
    }
    let (_, recall) = precision_recall(&model, test);
    assert!(recall < 0.1, "recall {recall}");
}

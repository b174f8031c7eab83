//! The spam filter's state: classifiers' counts and their bound, trained records, reputation,
//! thresholds in the cache, what a user's deletion and rename do to them, and greylisting.
//! Each check takes a `Directory`, so `tests/cluster.rs` runs them on PostgreSQL too.

use super::{Fixture, fast_options};
use crate::{
    Directory, DirectoryError, Greylisted, SpamClass, SpamDelta, SpamModelRows, SpamOwner,
    SpamStats, SpamThresholds,
};

const A: SpamOwner<'static> = SpamOwner::User("a@example.org");

/// `example.org` with users `a@` and `b@`, unless they exist already.
async fn users(d: &Directory) {
    if !d.cache().is_local_domain("example.org") {
        d.add_domain("example.org").await.unwrap();
        d.add_user("a@example.org", "pw-a").await.unwrap();
        d.add_user("b@example.org", "pw-b").await.unwrap();
    }
}

fn delta(spam: i64, ham: i64, tokens: &[(u64, i64, i64)]) -> SpamDelta {
    SpamDelta {
        spam_messages: spam,
        ham_messages: ham,
        tokens: tokens.to_vec(),
    }
}

async fn count(d: &Directory, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(&d.inner.pool)
        .await
        .unwrap()
}

/// Every count `spam_owners` and `spam_greylist_count` keep equals the rows it counts.
async fn counts_match_the_rows(d: &Directory) {
    for (column, table) in [
        ("tokens", "spam_tokens"),
        ("trained", "spam_trained"),
        ("reputation", "spam_reputation"),
    ] {
        let sql = format!(
            "SELECT COUNT(*) FROM spam_owners o WHERE o.{column} <> \
             (SELECT COUNT(*) FROM {table} t WHERE t.owner = o.id)"
        );
        assert_eq!(count(d, &sql).await, 0, "spam_owners.{column}");
    }
    assert_eq!(
        count(d, "SELECT entries FROM spam_greylist_count").await,
        count(d, "SELECT COUNT(*) FROM spam_greylist").await
    );
}

#[tokio::test]
async fn a_model_round_trips_with_negative_changes_and_high_hashes() {
    model_round_trip(&Fixture::new().await.dir).await;
}

pub(crate) async fn model_round_trip(d: &Directory) {
    users(d).await;
    assert_eq!(d.spam_model(A).await.unwrap(), SpamModelRows::default());
    let high = u64::MAX;
    let mid = 1 << 63;
    // A token twice in one batch adds up.
    let first = delta(2, 1, &[(high, 2, 0), (mid, 1, 1), (7, 0, 1), (7, 0, 2)]);
    assert!(d.spam_apply(A, &first, 1000).await.unwrap().is_empty());
    assert_eq!(
        d.spam_model(SpamOwner::User("A@Example.org"))
            .await
            .unwrap(),
        SpamModelRows {
            spam_messages: 2,
            ham_messages: 1,
            tokens: vec![(7, 0, 3), (mid, 1, 1), (high, 2, 0)],
        }
    );
    // Negative changes: held at 0, and a token at 0/0 is gone; an untrained token going
    // negative leaves nothing.
    let undo = delta(
        -5,
        -1,
        &[(high, -9, 0), (mid, -1, 0), (7, 0, -1), (8, -1, -1)],
    );
    d.spam_apply(A, &undo, 1000).await.unwrap();
    assert_eq!(
        d.spam_model(A).await.unwrap(),
        SpamModelRows {
            spam_messages: 0,
            ham_messages: 0,
            tokens: vec![(7, 0, 2), (mid, 0, 1)],
        }
    );
    // The site's model is its own.
    assert_eq!(
        d.spam_model(SpamOwner::Site).await.unwrap(),
        SpamModelRows::default()
    );
    d.spam_apply(SpamOwner::Site, &delta(1, 0, &[(high, 1, 0)]), 1000)
        .await
        .unwrap();
    assert_eq!(
        d.spam_model(SpamOwner::Site).await.unwrap().tokens,
        vec![(high, 1, 0)]
    );
    assert_eq!(d.spam_model(A).await.unwrap().tokens.len(), 2);
    // A batch larger than one statement's rows.
    let many: Vec<(u64, i64, i64)> = (0..1_234u64).map(|t| (t << 50, 1, 0)).collect();
    d.spam_apply(A, &delta(1, 0, &many), 10_000).await.unwrap();
    assert_eq!(d.spam_stats(A).await.unwrap().tokens, 1_234 + 2);
    assert!(matches!(
        d.spam_apply(SpamOwner::User("nobody@example.org"), &first, 1000)
            .await,
        Err(DirectoryError::NoSuchUser(a)) if a == "nobody@example.org"
    ));
    assert!(matches!(
        d.spam_model(SpamOwner::User("not an address")).await,
        Err(DirectoryError::InvalidAddress { .. })
    ));
    counts_match_the_rows(d).await;
}

#[tokio::test]
async fn past_its_bound_a_model_loses_the_tokens_seen_least() {
    model_pruning(&Fixture::new().await.dir).await;
}

pub(crate) async fn model_pruning(d: &Directory) {
    users(d).await;
    let b = SpamOwner::User("b@example.org");
    // 20 tokens seen 10 times each, then 10 seen once: the bound of 25 is passed.
    let seen: Vec<(u64, i64, i64)> = (0..20u64).map(|t| (u64::MAX - t, 5, 5)).collect();
    assert!(
        d.spam_apply(b, &delta(10, 10, &seen), 25)
            .await
            .unwrap()
            .is_empty()
    );
    let once: Vec<(u64, i64, i64)> = (100..110u64).map(|t| (t, 1, 0)).collect();
    let mut pruned = d.spam_apply(b, &delta(1, 0, &once), 25).await.unwrap();
    // Down to 90% of 25 (22): 8 of the 10 seen once.
    assert_eq!(pruned.len(), 8);
    pruned.sort_unstable();
    assert!(pruned.iter().all(|t| (100..110).contains(t)), "{pruned:?}");
    let model = d.spam_model(b).await.unwrap();
    assert_eq!(model.tokens.len(), 22);
    assert!(model.tokens.iter().all(|(t, _, _)| !pruned.contains(t)));
    assert_eq!(d.spam_stats(b).await.unwrap().tokens, 22);
    // Within the bound, nothing goes.
    let two: Vec<(u64, i64, i64)> = (200..203u64).map(|t| (t, 0, 1)).collect();
    assert!(
        d.spam_apply(b, &delta(0, 1, &two), 25)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(d.spam_stats(b).await.unwrap().tokens, 25);
    counts_match_the_rows(d).await;
}

#[tokio::test]
async fn trained_records_remember_the_class_and_are_bounded() {
    trained_records(&Fixture::new().await.dir).await;
}

pub(crate) async fn trained_records(d: &Directory) {
    users(d).await;
    assert_eq!(d.spam_trained(A, "d0").await.unwrap(), None);
    for (n, digest) in ["d0", "d1", "d2"].iter().enumerate() {
        let now = 1_000 + n as i64;
        d.spam_set_trained(A, digest, SpamClass::Spam, now, 3)
            .await
            .unwrap();
    }
    // Trained again as the other class: the same record, changed.
    d.spam_set_trained(A, "d1", SpamClass::Ham, 1_010, 3)
        .await
        .unwrap();
    assert_eq!(d.spam_trained(A, "d1").await.unwrap(), Some(SpamClass::Ham));
    assert_eq!(d.spam_stats(A).await.unwrap().trained, 3);
    // A fourth record: the oldest (d0) goes.
    d.spam_set_trained(A, "d3", SpamClass::Ham, 1_020, 3)
        .await
        .unwrap();
    assert_eq!(d.spam_trained(A, "d0").await.unwrap(), None);
    assert_eq!(
        d.spam_trained(A, "d2").await.unwrap(),
        Some(SpamClass::Spam)
    );
    assert_eq!(d.spam_stats(A).await.unwrap().trained, 3);
    // The site's records are its own.
    assert_eq!(d.spam_trained(SpamOwner::Site, "d2").await.unwrap(), None);
    d.spam_set_trained(SpamOwner::Site, "d2", SpamClass::Ham, 1_030, 3)
        .await
        .unwrap();
    assert_eq!(
        d.spam_trained(SpamOwner::Site, "d2").await.unwrap(),
        Some(SpamClass::Ham)
    );
    assert_eq!(
        d.spam_trained(A, "d2").await.unwrap(),
        Some(SpamClass::Spam)
    );
    let long = "x".repeat(crate::SPAM_DIGEST_BYTES_MAX + 1);
    for bad in ["", long.as_str()] {
        assert!(matches!(
            d.spam_set_trained(A, bad, SpamClass::Spam, 1, 3).await,
            Err(DirectoryError::InvalidSpamKey { .. })
        ));
    }
    counts_match_the_rows(d).await;
}

#[tokio::test]
async fn reputation_adds_up_clamps_and_is_bounded() {
    reputation(&Fixture::new().await.dir).await;
}

pub(crate) async fn reputation(d: &Directory) {
    users(d).await;
    let a = "a@example.org";
    let keys = |k: &[&str]| k.iter().map(|k| k.to_string()).collect::<Vec<_>>();
    let entry = |k: &str, spam, ham| (k.to_string(), spam, ham);
    d.spam_reputation_add(
        a,
        &[entry("from:x@y", 2, 0), entry("net:192.0.2.0/24", 0, 3)],
        100,
        3,
    )
    .await
    .unwrap();
    // Only the keys present, in the order asked; any case of the user.
    assert_eq!(
        d.spam_reputation(
            "A@example.org",
            &keys(&["net:192.0.2.0/24", "unknown", "from:x@y"])
        )
        .await
        .unwrap(),
        vec![
            ("net:192.0.2.0/24".to_string(), 0, 3),
            ("from:x@y".to_string(), 2, 0)
        ]
    );
    // Clamped at 0; a key at 0/0 is gone.
    d.spam_reputation_add(
        a,
        &[entry("from:x@y", -5, 1), entry("net:192.0.2.0/24", 0, -3)],
        110,
        3,
    )
    .await
    .unwrap();
    assert_eq!(
        d.spam_reputation(a, &keys(&["from:x@y", "net:192.0.2.0/24"]))
            .await
            .unwrap(),
        vec![("from:x@y".to_string(), 0, 1)]
    );
    assert_eq!(d.spam_stats(A).await.unwrap().reputation, 1);
    // Past 3 keys the least recently seen go: from:x@y (110), then k1 (120).
    for (n, key) in ["k1", "k2", "k3"].iter().enumerate() {
        d.spam_reputation_add(a, &[entry(key, 1, 0)], 120 + n as i64, 3)
            .await
            .unwrap();
    }
    d.spam_reputation_add(a, &[entry("k4", 0, 1)], 130, 3)
        .await
        .unwrap();
    let present = d
        .spam_reputation(a, &keys(&["from:x@y", "k1", "k2", "k3", "k4"]))
        .await
        .unwrap();
    let present: Vec<&str> = present.iter().map(|(k, _, _)| k.as_str()).collect();
    assert_eq!(present, ["k2", "k3", "k4"]);
    // Another user's keys are its own; an unknown user has none and cannot be given any.
    assert!(
        d.spam_reputation("b@example.org", &keys(&["k2"]))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        d.spam_reputation("nobody@example.org", &keys(&["k2"]))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        d.spam_reputation_add("nobody@example.org", &[entry("k", 1, 0)], 1, 3)
            .await,
        Err(DirectoryError::NoSuchUser(_))
    ));
    let long = "k".repeat(crate::REPUTATION_KEY_BYTES_MAX + 1);
    assert!(matches!(
        d.spam_reputation_add(a, &[entry(&long, 1, 0)], 1, 3).await,
        Err(DirectoryError::InvalidSpamKey { .. })
    ));
    assert!(d.spam_reputation(a, &[long]).await.unwrap().is_empty());
    counts_match_the_rows(d).await;
}

#[tokio::test]
async fn thresholds_fall_back_from_user_to_domain_in_the_cache() {
    let f = Fixture::new().await;
    thresholds(&f.dir, &f.second_handle().await).await;
}

/// `d` writes; `other` is another handle on the same directory (another node, or the CLI
/// beside the server), whose cache sees the change once refreshed.
pub(crate) async fn thresholds(d: &Directory, other: &Directory) {
    users(d).await;
    let none = SpamThresholds::default();
    assert_eq!(d.cache().spam_thresholds("a@example.org"), none);
    let domain = SpamThresholds {
        junk: Some(6.0),
        reject: Some(15.5),
        greylist: None,
    };
    let user = SpamThresholds {
        junk: Some(4.0),
        reject: None,
        greylist: Some(2.5),
    };
    d.spam_thresholds_set("Example.ORG", domain).await.unwrap();
    d.spam_thresholds_set("A@example.org", user).await.unwrap();
    // The user's own, then its domain's, field by field.
    let merged = SpamThresholds {
        junk: Some(4.0),
        reject: Some(15.5),
        greylist: Some(2.5),
    };
    assert_eq!(d.cache().spam_thresholds("a@example.org"), merged);
    assert_eq!(d.cache().spam_thresholds("A@EXAMPLE.ORG"), merged);
    assert_eq!(d.cache().spam_thresholds("b@example.org"), domain);
    assert_eq!(d.cache().spam_thresholds("c@elsewhere.example"), none);
    assert_eq!(
        d.spam_thresholds_list().await.unwrap(),
        vec![
            ("a@example.org".to_string(), user),
            ("example.org".to_string(), domain)
        ]
    );
    // Another handle's cache, once refreshed by the generation.
    assert!(other.cache().refresh_if_changed().await.unwrap());
    assert_eq!(other.cache().spam_thresholds("a@example.org"), merged);
    // All None removes the row.
    d.spam_thresholds_set("a@example.org", none).await.unwrap();
    assert_eq!(d.cache().spam_thresholds("a@example.org"), domain);
    assert!(other.cache().refresh_if_changed().await.unwrap());
    assert_eq!(other.cache().spam_thresholds("a@example.org"), domain);
    assert_eq!(d.spam_thresholds_list().await.unwrap().len(), 1);
    // Unknown targets are named; a threshold must be a number.
    assert_eq!(
        d.spam_thresholds_set("nobody@example.org", user)
            .await
            .unwrap_err()
            .to_string(),
        "no such user nobody@example.org"
    );
    assert_eq!(
        d.spam_thresholds_set("elsewhere.example", user)
            .await
            .unwrap_err()
            .to_string(),
        "no such domain elsewhere.example"
    );
    let nan = SpamThresholds {
        junk: Some(f64::NAN),
        ..none
    };
    assert!(matches!(
        d.spam_thresholds_set("example.org", nan).await,
        Err(DirectoryError::InvalidSpamThreshold { name: "junk", .. })
    ));
    d.spam_thresholds_set("example.org", none).await.unwrap();
    assert!(d.spam_thresholds_list().await.unwrap().is_empty());
    assert_eq!(d.cache().spam_thresholds("b@example.org"), none);
}

#[tokio::test]
async fn a_domain_takes_its_thresholds_with_it() {
    let f = Fixture::new().await;
    let d = &f.dir;
    d.add_domain("gone.example").await.unwrap();
    let junk = SpamThresholds {
        junk: Some(1.0),
        ..SpamThresholds::default()
    };
    d.spam_thresholds_set("gone.example", junk).await.unwrap();
    d.del_domain("gone.example").await.unwrap();
    assert!(d.spam_thresholds_list().await.unwrap().is_empty());
    d.add_domain("gone.example").await.unwrap();
    assert_eq!(
        d.cache().spam_thresholds("x@gone.example"),
        SpamThresholds::default()
    );
}

/// Everything a user can have: a model, trained records, reputation, thresholds.
async fn train_everything(d: &Directory, address: &str) {
    let owner = SpamOwner::User(address);
    d.spam_apply(owner, &delta(1, 2, &[(1, 1, 0), (u64::MAX, 0, 2)]), 100)
        .await
        .unwrap();
    d.spam_set_trained(owner, "digest", SpamClass::Spam, 1, 100)
        .await
        .unwrap();
    d.spam_reputation_add(address, &[("from:x@y".into(), 0, 1)], 1, 100)
        .await
        .unwrap();
    let junk = SpamThresholds {
        junk: Some(3.0),
        ..SpamThresholds::default()
    };
    d.spam_thresholds_set(address, junk).await.unwrap();
}

#[tokio::test]
async fn a_deleted_user_takes_its_spam_rows_with_it() {
    deleted_user(&Fixture::new().await.dir).await;
}

pub(crate) async fn deleted_user(d: &Directory) {
    d.add_domain("gone.example").await.unwrap();
    d.add_user("u@gone.example", "pw-u").await.unwrap();
    let user = SpamOwner::User("u@gone.example");
    train_everything(d, "u@gone.example").await;
    let id = count(
        d,
        "SELECT id FROM spam_owners WHERE address = 'u@gone.example'",
    )
    .await;
    d.del_user("u@gone.example").await.unwrap();
    for (table, column) in [
        ("spam_owners", "id"),
        ("spam_tokens", "owner"),
        ("spam_trained", "owner"),
        ("spam_reputation", "owner"),
    ] {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE {column} = {id}");
        assert_eq!(count(d, &sql).await, 0, "{table}");
    }
    let thresholds = "SELECT COUNT(*) FROM spam_user_thresholds WHERE address = 'u@gone.example'";
    assert_eq!(count(d, thresholds).await, 0);
    assert_eq!(d.spam_stats(user).await.unwrap(), SpamStats::default());
    assert_eq!(
        d.cache().spam_thresholds("u@gone.example"),
        SpamThresholds::default()
    );
    // The site's model is nobody's to delete.
    assert_eq!(
        count(d, "SELECT COUNT(*) FROM spam_owners WHERE id = 0").await,
        1
    );
    counts_match_the_rows(d).await;
}

#[tokio::test]
async fn a_renamed_user_keeps_its_spam_rows() {
    renamed_user(&Fixture::new().await.dir).await;
}

pub(crate) async fn renamed_user(d: &Directory) {
    d.add_domain("moving.example").await.unwrap();
    d.add_user("old@moving.example", "pw-old").await.unwrap();
    train_everything(d, "old@moving.example").await;
    let old = SpamOwner::User("old@moving.example");
    let new = SpamOwner::User("new@moving.example");
    let model = d.spam_model(old).await.unwrap();
    let stats = d.spam_stats(old).await.unwrap();
    let thresholds = d.cache().spam_thresholds("old@moving.example");
    let (from, to) = d
        .begin_rename("old@moving.example", "new@moving.example")
        .await
        .unwrap();
    d.finish_rename(&from, &to).await.unwrap();
    assert_eq!(d.spam_model(new).await.unwrap(), model);
    assert_eq!(d.spam_stats(new).await.unwrap(), stats);
    assert_eq!(
        d.spam_trained(new, "digest").await.unwrap(),
        Some(SpamClass::Spam)
    );
    assert_eq!(
        d.spam_reputation("new@moving.example", &["from:x@y".into()])
            .await
            .unwrap(),
        vec![("from:x@y".to_string(), 0, 1)]
    );
    assert_eq!(d.cache().spam_thresholds("new@moving.example"), thresholds);
    assert_eq!(d.spam_stats(old).await.unwrap(), SpamStats::default());
    assert_eq!(
        d.cache().spam_thresholds("old@moving.example"),
        SpamThresholds::default()
    );
    counts_match_the_rows(d).await;
}

#[tokio::test]
async fn greylisting_waits_passes_renews_expires_and_is_bounded() {
    greylisting(&Fixture::new().await.dir).await;
}

pub(crate) async fn greylisting(d: &Directory) {
    const DELAY: u64 = 300;
    const TTL: u64 = 36 * 24 * 3600;
    const DAY: i64 = 24 * 3600;
    let wait = |s| Greylisted::Wait { retry_after_s: s };
    let t0 = 1_000_000;
    let grey = |triplet: &'static str, now: i64| d.greylist(triplet, now, DELAY, TTL, 100);
    // New: recorded, wait the whole delay. An early retry waits the rest.
    assert_eq!(grey("t1", t0).await.unwrap(), wait(DELAY));
    assert_eq!(grey("t1", t0 + 100).await.unwrap(), wait(DELAY - 100));
    // After the delay: passes, and passes again at once, each pass renewing it.
    assert_eq!(grey("t1", t0 + 300).await.unwrap(), Greylisted::Pass);
    assert_eq!(grey("t1", t0 + 301).await.unwrap(), Greylisted::Pass);
    let late = t0 + 301 + TTL as i64 - 1;
    assert_eq!(grey("t1", late).await.unwrap(), Greylisted::Pass);
    // TTL after its last pass it is new again.
    assert_eq!(grey("t1", late + TTL as i64).await.unwrap(), wait(DELAY));
    // Never retried within 24 hours: new again.
    assert_eq!(grey("t2", t0).await.unwrap(), wait(DELAY));
    assert_eq!(grey("t2", t0 + DAY).await.unwrap(), wait(DELAY));
    assert_eq!(grey("t2", t0 + DAY + 299).await.unwrap(), wait(1));
    assert_eq!(grey("t2", t0 + DAY + 300).await.unwrap(), Greylisted::Pass);
    let long = "t".repeat(crate::GREYLIST_TRIPLET_BYTES_MAX + 1);
    assert!(matches!(
        d.greylist(&long, t0, DELAY, TTL, 100).await,
        Err(DirectoryError::InvalidSpamKey { .. })
    ));
    counts_match_the_rows(d).await;

    // The bound: a passed triplet outlives pending ones; the oldest pending go first.
    let bound = |triplet: &'static str, now: i64| d.greylist(triplet, now, DELAY, TTL, 3);
    // Long after everything above expired.
    let t = t0 + 100 * TTL as i64;
    bound("kept", t).await.unwrap();
    assert_eq!(bound("kept", t + 300).await.unwrap(), Greylisted::Pass);
    for (n, triplet) in ["p1", "p2", "p3", "p4"].into_iter().enumerate() {
        assert_eq!(
            bound(triplet, t + 400 + n as i64).await.unwrap(),
            wait(DELAY)
        );
    }
    assert_eq!(count(d, "SELECT COUNT(*) FROM spam_greylist").await, 3);
    let left: Vec<String> = sqlx::query_scalar("SELECT triplet FROM spam_greylist ORDER BY 1")
        .fetch_all(&d.inner.pool)
        .await
        .unwrap();
    assert_eq!(left, ["kept", "p3", "p4"]);
    assert_eq!(bound("kept", t + 500).await.unwrap(), Greylisted::Pass);
    // p1 was forgotten: new again.
    assert_eq!(bound("p1", t + 1_000).await.unwrap(), wait(DELAY));
    counts_match_the_rows(d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_handles_training_one_user_at_once_lose_nothing() {
    let f = Fixture::new().await;
    concurrent_training(&f.dir, &f.second_handle().await).await;
}

/// `d` and `other` (two handles, two nodes) train one user and greylist one new triplet at
/// the same moment: the counts add up and the triplet is recorded once.
pub(crate) async fn concurrent_training(d: &Directory, other: &Directory) {
    users(d).await;
    d.add_user("c@example.org", "pw-c").await.unwrap();
    let c = SpamOwner::User("c@example.org");
    let tokens: Vec<(u64, i64, i64)> = (0..300u64).map(|t| (t * 7919, 1, 0)).collect();
    let batch = delta(1, 0, &tokens);
    let rounds = 5;
    let train = |dir: &Directory| {
        let dir = dir.clone();
        let batch = batch.clone();
        tokio::spawn(async move {
            for _ in 0..rounds {
                dir.spam_apply(c, &batch, 10_000).await.unwrap();
            }
        })
    };
    let (one, two) = (train(d), train(other));
    one.await.unwrap();
    two.await.unwrap();
    let model = d.spam_model(c).await.unwrap();
    assert_eq!(model.spam_messages, 2 * rounds);
    assert_eq!(model.tokens.len(), 300);
    assert!(model.tokens.iter().all(|&(_, spam, _)| spam == 10));
    let (x, y) = tokio::join!(
        d.greylist("both", 1, 60, 3600, 100),
        other.greylist("both", 1, 60, 3600, 100)
    );
    let wait = Greylisted::Wait { retry_after_s: 60 };
    assert_eq!((x.unwrap(), y.unwrap()), (wait, wait));
    counts_match_the_rows(d).await;
}

/// A directory at schema version 9 (the one before the spam tables) with a user opens,
/// migrates, and trains.
#[tokio::test]
async fn a_version_9_directory_gains_the_spam_tables() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("directory.db");
    let pool = crate::db::connect_sqlite(&path, std::time::Duration::from_secs(5), 1)
        .await
        .unwrap();
    make_version_9(&pool, crate::db::Backend::Sqlite).await;
    pool.close().await;
    let d = Directory::open_with(&path, fast_options()).await.unwrap();
    trains_after_the_upgrade(&d).await;
}

/// The schema as migration 9 left it, with the user `a@example.org`, in an empty database.
pub(crate) async fn make_version_9(pool: &sqlx::AnyPool, backend: crate::db::Backend) {
    sqlx::raw_sql(
        "CREATE TABLE meta (key VARCHAR(64) NOT NULL PRIMARY KEY, value BIGINT NOT NULL); \
         INSERT INTO meta (key, value) VALUES ('schema_version', 9)",
    )
    .execute(pool)
    .await
    .unwrap();
    let migrations = crate::db::MIGRATIONS.iter().filter(|m| m.0 <= 9);
    for &(version, sqlite, postgres) in migrations {
        let sql = match backend {
            crate::db::Backend::Sqlite => sqlite,
            crate::db::Backend::Postgres => postgres,
        };
        sqlx::raw_sql(sql)
            .execute(pool)
            .await
            .unwrap_or_else(|e| panic!("migration {version}: {e}"));
    }
    sqlx::raw_sql(
        "INSERT INTO domains (name) VALUES ('example.org'); \
         INSERT INTO users (address, domain, password_hash, created_at) \
         VALUES ('a@example.org', 'example.org', 'x', 1)",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// What [`make_version_9`] made, opened by this build: at the current version, with a site-wide
/// classifier and room for the user's.
pub(crate) async fn trains_after_the_upgrade(d: &Directory) {
    let version: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'schema_version'")
        .fetch_one(&d.inner.pool)
        .await
        .unwrap();
    assert_eq!(version, crate::db::SCHEMA_VERSION);
    d.spam_apply(A, &delta(1, 0, &[(1, 1, 0)]), 10)
        .await
        .unwrap();
    d.spam_apply(SpamOwner::Site, &delta(0, 1, &[(1, 0, 1)]), 10)
        .await
        .unwrap();
    assert_eq!(d.spam_stats(A).await.unwrap().tokens, 1);
    assert_eq!(d.spam_stats(SpamOwner::Site).await.unwrap().ham_messages, 1);
    counts_match_the_rows(d).await;
}

#[tokio::test]
async fn spam_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let f = Fixture::new().await;
    let d = &f.dir;
    assert_send(&d.spam_model(A));
    assert_send(&d.spam_apply(A, &SpamDelta::default(), 1));
    assert_send(&d.spam_reputation("a@example.org", &[]));
    assert_send(&d.spam_reputation_add("a@example.org", &[], 1, 1));
    assert_send(&d.greylist("t", 1, 1, 1, 1));
    assert_send(&d.spam_thresholds_set("example.org", SpamThresholds::default()));
}

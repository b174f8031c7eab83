//! `authenticate`: right, wrong and unknown, and what never reaches argon2.

use super::{Fixture, fast_options, stored_generation};
use crate::{DirectoryError, Options};

async fn fixture() -> Fixture {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    f.dir
        .add_user("alice@example.org", "correct horse")
        .await
        .unwrap();
    f
}

#[tokio::test]
async fn right_password_gives_the_canonical_address() {
    let f = fixture().await;
    let ok = Some("alice@example.org".to_string());
    assert_eq!(
        f.dir
            .authenticate("alice@example.org", "correct horse")
            .await
            .unwrap(),
        ok
    );
    assert_eq!(
        f.dir
            .authenticate("ALICE@Example.Org", "correct horse")
            .await
            .unwrap(),
        ok
    );
}

#[tokio::test]
async fn wrong_password_and_unknown_users_give_none() {
    let f = fixture().await;
    let d = &f.dir;
    assert_eq!(
        d.authenticate("alice@example.org", "Correct horse")
            .await
            .unwrap(),
        None
    );
    assert!(
        d.inner.dummy_hash.get().is_none(),
        "known users never need the dummy hash"
    );
    assert_eq!(
        d.authenticate("bob@example.org", "correct horse")
            .await
            .unwrap(),
        None
    );
    assert!(
        d.inner.dummy_hash.get().is_some(),
        "an unknown user is verified against the dummy"
    );
    assert_eq!(
        d.authenticate("alice@other.org", "correct horse")
            .await
            .unwrap(),
        None
    );
    // The dummy's own password does not log anyone in.
    assert_eq!(
        d.authenticate("bob@example.org", "mailstow dummy password")
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn malformed_input_gives_none() {
    let f = fixture().await;
    let d = &f.dir;
    assert_eq!(
        d.authenticate("alice", "correct horse").await.unwrap(),
        None
    );
    assert_eq!(d.authenticate("", "correct horse").await.unwrap(), None);
    assert_eq!(
        d.authenticate("alice@example.org\r\n", "correct horse")
            .await
            .unwrap(),
        None
    );
    assert_eq!(d.authenticate("alice@example.org", "").await.unwrap(), None);
    let long = "x".repeat(Options::default().password_bytes_max + 1);
    assert_eq!(
        d.authenticate("alice@example.org", &long).await.unwrap(),
        None
    );
    // A subaddress is for mail, not for logging in.
    assert_eq!(
        d.authenticate("alice+imap@example.org", "correct horse")
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn password_changes_and_deletions_apply_at_once_even_from_another_handle() {
    let f = fixture().await;
    let cli = f.second_handle().await;
    cli.set_password("alice@example.org", "battery staple")
        .await
        .unwrap();
    // No cache involved: the server's handle sees the new hash without a refresh.
    assert_eq!(
        f.dir
            .authenticate("alice@example.org", "correct horse")
            .await
            .unwrap(),
        None
    );
    assert!(
        f.dir
            .authenticate("alice@example.org", "battery staple")
            .await
            .unwrap()
            .is_some()
    );
    cli.del_user("alice@example.org").await.unwrap();
    assert_eq!(
        f.dir
            .authenticate("alice@example.org", "battery staple")
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn authenticating_writes_nothing() {
    let f = fixture().await;
    let before = stored_generation(&f.dir).await;
    f.dir
        .authenticate("alice@example.org", "correct horse")
        .await
        .unwrap();
    f.dir.authenticate("nobody@example.org", "x").await.unwrap();
    assert_eq!(stored_generation(&f.dir).await, before);
}

#[tokio::test]
async fn a_corrupt_hash_is_an_error_not_a_wrong_password() {
    let f = fixture().await;
    sqlx::query("UPDATE users SET password_hash = 'not a phc string'")
        .execute(&f.dir.inner.pool)
        .await
        .unwrap();
    // Logins read the cached hash; a change reaches the cache through the generation, as
    // every directory write bumps it.
    sqlx::query("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
        .execute(&f.dir.inner.pool)
        .await
        .unwrap();
    let err = f
        .dir
        .authenticate("alice@example.org", "correct horse")
        .await
        .unwrap_err();
    assert!(matches!(err, DirectoryError::Corrupt(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with("corrupt directory data: password hash"),
        "{err}"
    );
}

#[tokio::test]
async fn hashes_made_with_other_parameters_still_verify() {
    let f = fixture().await;
    let stronger = Options {
        argon2_params: crate::Argon2Params::new(64, 2, 2, None).unwrap(),
        ..fast_options()
    };
    let other = crate::Directory::open_with(&f.path, stronger)
        .await
        .unwrap();
    other
        .set_password("alice@example.org", "new")
        .await
        .unwrap();
    assert!(
        f.dir
            .authenticate("alice@example.org", "new")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_logins_at_once_share_the_hasher_limit() {
    let f = Fixture::with_options(Options {
        hash_concurrency_max: 1,
        ..fast_options()
    })
    .await;
    f.dir.add_domain("example.org").await.unwrap();
    f.dir.add_user("alice@example.org", "pw").await.unwrap();
    let logins: Vec<_> = (0..32)
        .map(|n| {
            let dir = f.dir.clone();
            tokio::spawn(async move {
                let user = if n % 2 == 0 {
                    "alice@example.org"
                } else {
                    "bob@example.org"
                };
                (n, dir.authenticate(user, "pw").await.unwrap())
            })
        })
        .collect();
    for login in logins {
        let (n, result) = login.await.unwrap();
        assert_eq!(result.is_some(), n % 2 == 0);
    }
}

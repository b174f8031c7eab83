//! A user's whole life beyond add and delete: the message quota, the last login, rename.

use super::{Fixture, stored_generation};
use crate::DirectoryError;

async fn with_users() -> Fixture {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    f.dir.add_domain("other.org").await.unwrap();
    f.dir.add_user("a@example.org", "pw-a").await.unwrap();
    f.dir.add_user("b@example.org", "pw-b").await.unwrap();
    f
}

#[tokio::test]
async fn message_quotas_reach_the_cache_and_the_listing() {
    let f = with_users().await;
    assert_eq!(f.dir.cache().message_quota("a@example.org"), None);
    f.dir
        .set_message_quota("A@example.org", Some(1000))
        .await
        .unwrap();
    f.dir
        .set_quota("a@example.org", Some(5 << 20))
        .await
        .unwrap();
    assert_eq!(f.dir.cache().message_quota("a@EXAMPLE.org"), Some(1000));
    let a = f.dir.user("a@example.org").await.unwrap().unwrap();
    assert_eq!(
        (a.quota_bytes, a.quota_messages, a.last_login_at),
        (Some(5 << 20), Some(1000), None)
    );
    f.dir
        .set_message_quota("a@example.org", None)
        .await
        .unwrap();
    assert_eq!(f.dir.cache().message_quota("a@example.org"), None);
    assert!(matches!(
        f.dir.set_message_quota("nobody@example.org", Some(1)).await,
        Err(DirectoryError::NoSuchUser(_))
    ));
    let err = f
        .dir
        .set_message_quota("a@example.org", Some(u64::MAX))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "quota 18446744073709551615 messages is too large (max 9223372036854775807)"
    );
    assert_eq!(f.dir.user("nobody@example.org").await.unwrap(), None);
}

#[tokio::test]
async fn a_login_is_recorded_once_a_minute_without_a_new_generation() {
    let f = with_users().await;
    let generation = stored_generation(&f.dir).await;
    f.dir.note_login("a@example.org");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let first = loop {
        let a = f.dir.user("a@example.org").await.unwrap().unwrap();
        if let Some(at) = a.last_login_at {
            break at;
        }
        assert!(std::time::Instant::now() < deadline, "never recorded");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let now = crate::db::unix_now_s();
    assert!((now - 5..=now).contains(&first), "{first} vs {now}");
    assert_eq!(stored_generation(&f.dir).await, generation);
    let b = f.dir.user("b@example.org").await.unwrap().unwrap();
    assert_eq!(b.last_login_at, None);
}

#[tokio::test]
async fn rename_moves_the_row_subscriptions_and_aliases() {
    let f = with_users().await;
    f.dir.set_quota("a@example.org", Some(7)).await.unwrap();
    f.dir
        .set_subscribed("a@example.org", "Work", true)
        .await
        .unwrap();
    f.dir.add_user("c@other.org", "pw-c").await.unwrap();
    f.dir
        .add_alias("sales@example.org", "a@example.org")
        .await
        .unwrap();
    f.dir
        .add_alias("sales@example.org", "c@other.org")
        .await
        .unwrap();
    f.dir
        .add_alias("both@example.org", "a@example.org")
        .await
        .unwrap();
    f.dir
        .add_alias("both@example.org", "c@other.org")
        .await
        .unwrap();

    // Refusals: the target exists, is not in our domains, the source does not exist.
    for (old, new, expected) in [
        (
            "a@example.org",
            "b@example.org",
            "user b@example.org already exists",
        ),
        (
            "a@example.org",
            "C@other.org",
            "user c@other.org already exists",
        ),
        (
            "a@example.org",
            "a@EXAMPLE.org",
            "user a@example.org already exists",
        ),
        (
            "a@example.org",
            "x@nowhere.org",
            "no such domain nowhere.org",
        ),
        (
            "z@example.org",
            "x@example.org",
            "no such user z@example.org",
        ),
    ] {
        let err = f.dir.begin_rename(old, new).await.unwrap_err();
        assert_eq!(err.to_string(), expected);
    }
    assert!(f.dir.pending_renames().await.unwrap().is_empty());

    let (old, new) = f
        .dir
        .begin_rename("A@example.org", "Alice@Other.org")
        .await
        .unwrap();
    assert_eq!(
        (old.as_str(), new.as_str()),
        ("a@example.org", "alice@other.org")
    );
    assert_eq!(
        f.dir.pending_renames().await.unwrap(),
        [(old.clone(), new.clone())]
    );
    // While it is pending, neither address can be added, deleted or renamed again.
    assert!(matches!(
        f.dir.add_user("alice@other.org", "pw").await,
        Err(DirectoryError::UserBeingRenamed(_))
    ));
    assert!(matches!(
        f.dir.del_user("a@example.org").await,
        Err(DirectoryError::UserBeingRenamed(_))
    ));
    assert!(matches!(
        f.dir.begin_rename("a@example.org", "d@other.org").await,
        Err(DirectoryError::UserBeingRenamed(_))
    ));
    // Nothing changed for mail yet.
    assert!(f.dir.cache().is_user("a@example.org"));

    f.dir.finish_rename(&old, &new).await.unwrap();
    assert!(f.dir.pending_renames().await.unwrap().is_empty());
    assert!(!f.dir.cache().is_user("a@example.org"));
    assert_eq!(f.dir.cache().quota("alice@other.org"), Some(7));
    assert_eq!(
        f.dir.subscriptions("alice@other.org").await.unwrap(),
        ["Work"]
    );
    assert!(
        f.dir
            .subscriptions("a@example.org")
            .await
            .unwrap()
            .is_empty()
    );
    let aliases = f.dir.list_aliases().await.unwrap();
    assert!(
        aliases.contains(&("sales@example.org".into(), "alice@other.org".into())),
        "{aliases:?}"
    );
    assert!(
        !aliases.iter().any(|(_, d)| d == "a@example.org"),
        "{aliases:?}"
    );
    // The password came along; the old address is free again.
    assert_eq!(
        f.dir.authenticate("alice@other.org", "pw-a").await.unwrap(),
        Some("alice@other.org".into())
    );
    assert_eq!(
        f.dir.authenticate("a@example.org", "pw-a").await.unwrap(),
        None
    );
    // Finishing again is harmless.
    f.dir.finish_rename(&old, &new).await.unwrap();
    f.dir.add_user("a@example.org", "pw-new").await.unwrap();

    // A rename whose mail could not move is abandoned: the user stays, both names are free.
    let (old, new) = f
        .dir
        .begin_rename("a@example.org", "b2@other.org")
        .await
        .unwrap();
    f.dir.abandon_rename(&old).await.unwrap();
    assert!(f.dir.pending_renames().await.unwrap().is_empty());
    assert!(f.dir.cache().is_user(&old) && !f.dir.cache().is_user(&new));
    f.dir.begin_rename(&old, &new).await.unwrap();
}

/// Admins and the login history, on any backend (`cluster.rs` runs it on PostgreSQL).
pub(crate) async fn admins_and_login_history(dir: &crate::Directory) {
    use crate::{Attempt, LOGINS_KEPT_MAX};
    use std::net::IpAddr;

    dir.add_domain("example.org").await.unwrap();
    dir.add_user("a@example.org", "pw-a").await.unwrap();
    dir.add_user_as("root@example.org", "pw-r", None, true)
        .await
        .unwrap();
    assert!(dir.cache().is_admin("root@example.org"));
    assert!(!dir.cache().is_admin("a@example.org"));
    assert!(dir.user("root@example.org").await.unwrap().unwrap().admin);
    assert!(!dir.set_admin("A@example.org", true).await.unwrap());
    assert!(
        dir.cache().is_admin("a@example.org"),
        "the cache sees it at once"
    );
    assert!(dir.set_admin("a@example.org", false).await.unwrap());
    assert!(!dir.cache().is_admin("a@example.org"));
    assert!(matches!(
        dir.set_admin("nobody@example.org", true).await,
        Err(DirectoryError::NoSuchUser(_))
    ));

    let home: IpAddr = "192.0.2.1".parse().unwrap();
    let guesser: IpAddr = "203.0.113.9".parse().unwrap();
    dir.note_attempt("a@example.org", home, "imap", Attempt::Ok);
    dir.note_attempt("a@example.org", home, "imap", Attempt::Ok);
    dir.note_attempt("a@example.org", guesser, "pop3", Attempt::Failed);
    // Not written yet, but shown.
    let before = dir.recent_logins("a@example.org").await.unwrap();
    assert_eq!(before.len(), 2, "{before:?}");
    dir.flush_attempts().await.unwrap();
    dir.note_attempt("a@example.org", home, "imap", Attempt::Ok);
    dir.flush_attempts().await.unwrap();
    let rows = dir.recent_logins("a@example.org").await.unwrap();
    let ok = rows.iter().find(|r| r.result == Attempt::Ok).unwrap();
    assert_eq!(
        (ok.client.as_str(), ok.protocol.as_str(), ok.attempts),
        ("192.0.2.1", "imap", 3)
    );
    let failed = rows.iter().find(|r| r.result == Attempt::Failed).unwrap();
    assert_eq!(
        (failed.client.as_str(), failed.attempts),
        ("203.0.113.9", 1)
    );
    assert!(
        dir.recent_logins("root@example.org")
            .await
            .unwrap()
            .is_empty()
    );

    // A guesser rotating addresses: only the newest rows stay.
    for i in 0..LOGINS_KEPT_MAX + 15 {
        let ip: IpAddr = format!("198.51.100.{i}").parse().unwrap();
        dir.note_attempt("a@example.org", ip, "imap", Attempt::Throttled);
    }
    dir.flush_attempts().await.unwrap();
    let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM logins WHERE address = $1")
        .bind("a@example.org")
        .fetch_one(&dir.inner.pool)
        .await
        .unwrap();
    assert_eq!(stored, LOGINS_KEPT_MAX as i64);

    // A deleted user's history goes with it, and late attempts are not written.
    dir.del_user("a@example.org").await.unwrap();
    dir.note_attempt("a@example.org", home, "imap", Attempt::Failed);
    dir.flush_attempts().await.unwrap();
    let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM logins WHERE address = $1")
        .bind("a@example.org")
        .fetch_one(&dir.inner.pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}

#[tokio::test]
async fn admins_and_login_history_on_sqlite() {
    let f = Fixture::new().await;
    admins_and_login_history(&f.dir).await;
}

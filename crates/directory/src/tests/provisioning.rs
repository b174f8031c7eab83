//! Provisioning (domains, users, aliases), its error paths and messages, persistence and
//! migrations.

use std::time::Duration;

use super::{Fixture, fast_options, open, stored_generation};
use crate::tests::address::domain_of_len;
use crate::{Directory, DirectoryError, Options, UserInfo};

fn user(address: &str, quota_bytes: Option<u64>) -> UserInfo {
    UserInfo {
        address: address.into(),
        quota_bytes,
        quota_messages: None,
        last_login_at: None,
        node: None,
        epoch: 1,
        admin: false,
    }
}

#[tokio::test]
async fn domains_add_list_delete() {
    let f = Fixture::new().await;
    f.dir.add_domain("Example.ORG").await.unwrap();
    f.dir.add_domain("a.example").await.unwrap();
    assert_eq!(
        f.dir.list_domains().await.unwrap(),
        ["a.example", "example.org"]
    );

    let err = f.dir.add_domain("EXAMPLE.org").await.unwrap_err();
    assert!(matches!(err, DirectoryError::DomainExists(_)));
    assert_eq!(err.to_string(), "domain example.org already exists");

    f.dir.del_domain("a.EXAMPLE").await.unwrap();
    assert_eq!(f.dir.list_domains().await.unwrap(), ["example.org"]);
    let err = f.dir.del_domain("a.example").await.unwrap_err();
    assert_eq!(err.to_string(), "no such domain a.example");
}

#[tokio::test]
async fn invalid_domain_names_are_refused() {
    let f = Fixture::new().await;
    let err = f.dir.add_domain("bad_domain.org").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid domain \"bad_domain.org\": domain may hold only letters, digits, hyphens and dots"
    );
    // The limit through the API: 255 is fine, 256 is not.
    f.dir.add_domain(&domain_of_len(255)).await.unwrap();
    let err = f.dir.add_domain(&domain_of_len(256)).await.unwrap_err();
    assert!(
        err.to_string()
            .ends_with(": domain is longer than 255 octets"),
        "{err}"
    );
    // Long input is cut in the message, which stays one line.
    let err = f
        .dir
        .add_domain(&format!("{}\n", "x".repeat(1000)))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(message.len() < 200 && !message.contains('\n'), "{message}");
    assert!(matches!(
        f.dir.del_domain("").await,
        Err(DirectoryError::InvalidDomain { .. })
    ));
}

#[tokio::test]
async fn del_domain_is_refused_while_users_or_aliases_exist() {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    f.dir.add_user("a@example.org", "pw").await.unwrap();
    f.dir
        .add_alias("@example.org", "a@example.org")
        .await
        .unwrap();
    let err = f.dir.del_domain("example.org").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "domain example.org still has 1 user(s) and 1 alias(es); delete them first"
    );
    f.dir.del_user("a@example.org").await.unwrap();
    let err = f.dir.del_domain("example.org").await.unwrap_err();
    assert!(matches!(
        err,
        DirectoryError::DomainNotEmpty {
            users: 0,
            aliases: 1,
            ..
        }
    ));
    f.dir.del_alias("@example.org", None).await.unwrap();
    f.dir.del_domain("example.org").await.unwrap();
    assert!(f.dir.list_domains().await.unwrap().is_empty());
}

#[tokio::test]
async fn foreign_keys_are_enforced_by_the_database_too() {
    let f = Fixture::new().await;
    let result = sqlx::query(
        "INSERT INTO users (address, domain, password_hash, created_at) \
         VALUES ('a@nowhere.org', 'nowhere.org', 'x', 0)",
    )
    .execute(&f.dir.inner.pool)
    .await;
    assert!(matches!(result, Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation()));
}

#[tokio::test]
async fn users_add_list_delete() {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    f.dir.add_domain("other.org").await.unwrap();
    f.dir.add_user("Bob@Example.org", "pw").await.unwrap();
    f.dir.add_user("alice@example.org", "pw").await.unwrap();
    f.dir.add_user("carol@other.org", "pw").await.unwrap();

    assert_eq!(
        f.dir.list_users(None).await.unwrap(),
        [
            user("alice@example.org", None),
            user("bob@example.org", None),
            user("carol@other.org", None)
        ]
    );
    assert_eq!(
        f.dir.list_users(Some("OTHER.org")).await.unwrap(),
        [user("carol@other.org", None)]
    );
    let err = f.dir.list_users(Some("none.org")).await.unwrap_err();
    assert_eq!(err.to_string(), "no such domain none.org");

    let err = f.dir.add_user("BOB@example.org", "pw").await.unwrap_err();
    assert_eq!(err.to_string(), "user bob@example.org already exists");
    let err = f.dir.add_user("dave@none.org", "pw").await.unwrap_err();
    assert_eq!(err.to_string(), "no such domain none.org");
    let err = f.dir.add_user("no at sign", "pw").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid address \"no at sign\": missing @domain"
    );

    f.dir.del_user("BOB@example.org").await.unwrap();
    let err = f.dir.del_user("bob@example.org").await.unwrap_err();
    assert_eq!(err.to_string(), "no such user bob@example.org");
    assert_eq!(
        f.dir.list_users(Some("example.org")).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn passwords_are_checked_and_stored_as_argon2id() {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    let err = f.dir.add_user("a@example.org", "").await.unwrap_err();
    assert_eq!(err.to_string(), "invalid password: password is empty");
    let err = f.dir.add_user("a@example.org", "a\0b").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid password: password contains a NUL byte"
    );
    let max = Options::default().password_bytes_max;
    let err = f
        .dir
        .add_user("a@example.org", &"p".repeat(max + 1))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid password: password is longer than password_bytes_max"
    );
    f.dir
        .add_user("a@example.org", &"p".repeat(max))
        .await
        .unwrap();

    let hash: String = sqlx::query_scalar("SELECT password_hash FROM users")
        .fetch_one(&f.dir.inner.pool)
        .await
        .unwrap();
    assert!(hash.starts_with("$argon2id$v=19$m=8,t=1,p=1$"), "{hash}");

    f.dir.set_password("A@example.org", "new").await.unwrap();
    let new_hash: String = sqlx::query_scalar("SELECT password_hash FROM users")
        .fetch_one(&f.dir.inner.pool)
        .await
        .unwrap();
    assert_ne!(hash, new_hash);
    let err = f
        .dir
        .set_password("b@example.org", "new")
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "no such user b@example.org");
    let err = f.dir.set_password("a@example.org", "").await.unwrap_err();
    assert!(matches!(err, DirectoryError::InvalidPassword(_)));
}

#[tokio::test]
async fn production_parameters_are_owasp() {
    let hash = crate::password::hash(&Options::default().argon2_params, "pw").unwrap();
    assert!(
        hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{hash}"
    );
    let mut memory = Vec::new();
    assert!(crate::hasher::verify(&hash, "pw", &mut memory, 64 << 20).unwrap());
    assert!(!crate::hasher::verify(&hash, "pW", &mut memory, 64 << 20).unwrap());
}

#[tokio::test]
async fn quotas() {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    f.dir.add_user("a@example.org", "pw").await.unwrap();
    f.dir
        .set_quota("A@example.org", Some(1 << 30))
        .await
        .unwrap();
    assert_eq!(
        f.dir.list_users(None).await.unwrap(),
        [user("a@example.org", Some(1 << 30))]
    );
    assert_eq!(f.dir.cache().quota("a@EXAMPLE.org"), Some(1 << 30));

    let largest = i64::MAX as u64;
    f.dir
        .set_quota("a@example.org", Some(largest))
        .await
        .unwrap();
    assert_eq!(f.dir.cache().quota("a@example.org"), Some(largest));
    let err = f
        .dir
        .set_quota("a@example.org", Some(largest + 1))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "quota 9223372036854775808 bytes is too large (max 9223372036854775807)"
    );

    f.dir.set_quota("a@example.org", Some(0)).await.unwrap();
    assert_eq!(f.dir.cache().quota("a@example.org"), Some(0));
    f.dir.set_quota("a@example.org", None).await.unwrap();
    assert_eq!(f.dir.cache().quota("a@example.org"), None);
    assert_eq!(
        f.dir.list_users(None).await.unwrap(),
        [user("a@example.org", None)]
    );

    let err = f.dir.set_quota("b@example.org", Some(1)).await.unwrap_err();
    assert_eq!(err.to_string(), "no such user b@example.org");
    // The database refuses a negative quota even from another writer.
    let result = sqlx::query("UPDATE users SET quota_bytes = -1")
        .execute(&f.dir.inner.pool)
        .await;
    assert!(result.is_err());
}

#[tokio::test]
async fn aliases_add_list_delete() {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    // A local destination must exist: mail to the alias would be accepted, then bounce.
    let err = f
        .dir
        .add_alias("sales@example.org", "a@example.org")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "a@example.org is in a local domain but is neither a user nor an alias; add the user first"
    );
    f.dir.add_user("a@example.org", "pw").await.unwrap();
    f.dir.add_user("b@example.org", "pw").await.unwrap();
    f.dir
        .add_alias("Sales@Example.org", "Boss@Remote.NET")
        .await
        .unwrap();
    f.dir
        .add_alias("sales@example.org", "a@example.org")
        .await
        .unwrap();
    f.dir
        .add_alias("@example.org", "a@example.org")
        .await
        .unwrap();
    assert_eq!(
        f.dir.list_aliases().await.unwrap(),
        [
            ("@example.org".to_string(), "a@example.org".to_string()),
            ("sales@example.org".into(), "Boss@remote.net".into()),
            ("sales@example.org".into(), "a@example.org".into()),
        ]
    );

    let err = f
        .dir
        .add_alias("sales@example.org", "Boss@REMOTE.net")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "alias sales@example.org -> Boss@remote.net already exists"
    );
    let err = f
        .dir
        .add_alias("x@none.org", "a@example.org")
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "no such domain none.org");
    let err = f
        .dir
        .add_alias("@none.org", "a@example.org")
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "no such domain none.org");
    let err = f
        .dir
        .add_alias("x@example.org", "not an address")
        .await
        .unwrap_err();
    assert!(matches!(err, DirectoryError::InvalidAddress { .. }));
    let err = f
        .dir
        .add_alias("@bad_domain", "a@example.org")
        .await
        .unwrap_err();
    assert!(matches!(err, DirectoryError::InvalidDomain { .. }));

    // Deleting one destination matches it case-insensitively.
    f.dir
        .del_alias("SALES@example.org", Some("boss@remote.net"))
        .await
        .unwrap();
    let err = f
        .dir
        .del_alias("sales@example.org", Some("boss@remote.net"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no such alias sales@example.org -> boss@remote.net"
    );
    f.dir
        .add_alias("sales@example.org", "b@example.org")
        .await
        .unwrap();
    f.dir.del_alias("sales@example.org", None).await.unwrap();
    let err = f
        .dir
        .del_alias("sales@example.org", None)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "no such alias sales@example.org");
    assert_eq!(f.dir.list_aliases().await.unwrap().len(), 1);
}

#[tokio::test]
async fn one_catch_all_per_domain() {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    f.dir.add_user("a@example.org", "pw").await.unwrap();
    f.dir.add_user("b@example.org", "pw").await.unwrap();
    f.dir
        .add_alias("@Example.org", "a@example.org")
        .await
        .unwrap();
    let err = f
        .dir
        .add_alias("@example.org", "b@example.org")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "domain example.org already has a catch-all (@example.org -> a@example.org); \
         delete it first"
    );
    let err = f
        .dir
        .add_alias("@example.org", "a@example.org")
        .await
        .unwrap_err();
    assert!(matches!(err, DirectoryError::AliasExists { .. }));
    // The partial unique index holds even for a writer that skips the check.
    let result = sqlx::query(
        "INSERT INTO aliases (source, destination, domain) \
         VALUES ('@example.org', 'c@example.org', 'example.org')",
    )
    .execute(&f.dir.inner.pool)
    .await;
    assert!(matches!(result, Err(sqlx::Error::Database(e)) if e.is_unique_violation()));
    f.dir
        .del_alias("@example.org", Some("a@example.org"))
        .await
        .unwrap();
    f.dir
        .add_alias("@example.org", "b@example.org")
        .await
        .unwrap();
}

/// `password_length_min` counts characters and holds for every way a password is set; a
/// password set before keeps logging in.
#[tokio::test]
async fn new_passwords_have_at_least_password_length_min_characters() {
    let f = Fixture::with_options(Options {
        password_length_min: 8,
        ..fast_options()
    })
    .await;
    f.dir.add_domain("example.org").await.unwrap();
    let short = "invalid password: password is shorter than password_length_min (8 characters)";
    for err in [
        f.dir
            .add_user("a@example.org", "1234567")
            .await
            .unwrap_err(),
        f.dir
            .add_user_as("a@example.org", "1234567", None, true)
            .await
            .unwrap_err(),
        // Seven characters in fourteen bytes: characters count.
        f.dir
            .add_user("a@example.org", "ééééééé")
            .await
            .unwrap_err(),
    ] {
        assert_eq!(err.to_string(), short);
    }
    let err = f.dir.add_user("a@example.org", "x").await.unwrap_err();
    assert_eq!(err.to_string(), short);
    f.dir.add_user("a@example.org", "éééééééé").await.unwrap();
    let err = f
        .dir
        .set_password("a@example.org", "1234567")
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), short);
    f.dir
        .set_password("a@example.org", "12345678")
        .await
        .unwrap();
    assert!(
        Options {
            password_length_min: 0,
            ..Options::default()
        }
        .validate()
        .is_err()
    );
}

#[tokio::test]
async fn alias_destinations_are_limited() {
    let f = Fixture::with_options(Options {
        expansion_targets_max: 3,
        ..fast_options()
    })
    .await;
    f.dir.add_domain("example.org").await.unwrap();
    for n in 0..3 {
        f.dir
            .add_alias("list@example.org", &format!("m{n}@remote.net"))
            .await
            .unwrap();
    }
    let err = f
        .dir
        .add_alias("list@example.org", "m3@remote.net")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "alias list@example.org already has 3 destinations (expansion_targets_max)"
    );
}

#[tokio::test]
async fn every_write_bumps_the_generation_once_and_failures_do_not() {
    let f = Fixture::new().await;
    assert_eq!(stored_generation(&f.dir).await, 0);
    let d = &f.dir;
    d.add_domain("example.org").await.unwrap();
    d.add_user("a@example.org", "pw").await.unwrap();
    d.set_password("a@example.org", "pw2").await.unwrap();
    d.set_quota("a@example.org", Some(5)).await.unwrap();
    d.add_alias("b@example.org", "a@example.org").await.unwrap();
    d.del_alias("b@example.org", None).await.unwrap();
    d.del_user("a@example.org").await.unwrap();
    d.del_domain("example.org").await.unwrap();
    assert_eq!(stored_generation(d).await, 8);
    assert_eq!(d.cache().generation(), 8);

    assert!(d.del_domain("example.org").await.is_err());
    assert!(d.add_user("a@none.org", "pw").await.is_err());
    assert!(d.del_user("a@none.org").await.is_err());
    assert!(d.set_quota("a@none.org", None).await.is_err());
    assert!(d.add_alias("a@none.org", "x@y.org").await.is_err());
    assert!(d.del_alias("a@none.org", None).await.is_err());
    // Reads do not bump either.
    d.list_domains().await.unwrap();
    d.list_users(None).await.unwrap();
    d.list_aliases().await.unwrap();
    assert_eq!(stored_generation(d).await, 8);
}

#[tokio::test]
async fn data_survives_reopening() {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    f.dir.add_user("a@example.org", "pw").await.unwrap();
    f.dir.set_quota("a@example.org", Some(7)).await.unwrap();
    f.dir
        .add_alias("b@example.org", "a@example.org")
        .await
        .unwrap();
    f.dir.close().await;

    let reopened = open(&f.path).await;
    assert_eq!(reopened.list_domains().await.unwrap(), ["example.org"]);
    assert_eq!(
        reopened.list_users(None).await.unwrap(),
        [user("a@example.org", Some(7))]
    );
    assert_eq!(reopened.list_aliases().await.unwrap().len(), 1);
    assert_eq!(reopened.cache().quota("a@example.org"), Some(7));
    assert_eq!(
        reopened
            .authenticate("a@example.org", "pw")
            .await
            .unwrap()
            .as_deref(),
        Some("a@example.org")
    );
    assert_eq!(stored_generation(&reopened).await, 4);
}

#[tokio::test]
async fn the_file_uses_wal_and_full_sync_and_records_its_schema_version() {
    let f = Fixture::new().await;
    let pool = &f.dir.inner.pool;
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    // FULL = 2.
    let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(sync, 2);
    let version: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'schema_version'")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(version, crate::db::SCHEMA_VERSION);
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let f = Fixture::new().await;
    sqlx::query("UPDATE meta SET value = 99 WHERE key = 'schema_version'")
        .execute(&f.dir.inner.pool)
        .await
        .unwrap();
    f.dir.close().await;
    let err = Directory::open_with(&f.path, fast_options())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the directory was migrated by a newer mailstow (schema version 99); this build \
             reads up to schema version {}: run the newer mailstow, or restore the backup taken \
             before the upgrade (docs/operations.md)",
            crate::db::SCHEMA_VERSION
        )
    );
    // The refusal wrote nothing: the version is still the newer one.
    let pool = crate::db::connect_sqlite(&f.path, Duration::from_secs(5), 1)
        .await
        .unwrap();
    let version: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'schema_version'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(version, 99);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_opens_migrate_once() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("directory.db");
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let path = path.clone();
            tokio::spawn(async move { Directory::open_with(&path, fast_options()).await })
        })
        .collect();
    for open in opens {
        open.await.unwrap().expect("every concurrent open succeeds");
    }
    let dir = open(&path).await;
    assert_eq!(stored_generation(&dir).await, 0);
}

#[tokio::test]
async fn open_errors_name_the_file() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("missing-dir").join("directory.db");
    let err = Directory::open_with(&path, fast_options())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(message.starts_with("open directory "), "{message}");
    assert!(message.contains("missing-dir"), "{message}");
}

#[tokio::test]
async fn options_are_validated() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("directory.db");
    let cases = [
        (
            Options {
                expansion_targets_max: 0,
                ..fast_options()
            },
            "expansion_targets_max",
        ),
        (
            Options {
                expansion_depth_max: 0,
                ..fast_options()
            },
            "expansion_depth_max",
        ),
        (
            Options {
                expansion_depth_max: 101,
                ..fast_options()
            },
            "expansion_depth_max",
        ),
        (
            Options {
                password_bytes_max: 0,
                ..fast_options()
            },
            "password_bytes_max",
        ),
        (
            Options {
                hash_concurrency_max: 0,
                ..fast_options()
            },
            "hash_concurrency_max",
        ),
        (
            Options {
                connections_max: 0,
                ..fast_options()
            },
            "connections_max",
        ),
    ];
    for (options, field) in cases {
        let err = Directory::open_with(&path, options).await.unwrap_err();
        assert!(
            err.to_string().starts_with("invalid directory options: "),
            "{err}"
        );
        assert!(err.to_string().contains(field), "{err}");
    }
    assert!(!path.exists(), "a refused open creates nothing");
    assert!(Options::default().validate().is_ok());
}

#[tokio::test]
async fn subscriptions_are_a_per_user_set_that_goes_with_the_user() {
    let f = Fixture::new().await;
    let d = &f.dir;
    d.add_domain("example.org").await.unwrap();
    d.add_user("a@example.org", "pw-a-long-enough")
        .await
        .unwrap();
    d.add_user("b@example.org", "pw-b-long-enough")
        .await
        .unwrap();
    d.set_subscribed("a@example.org", "INBOX", true)
        .await
        .unwrap();
    d.set_subscribed("a@example.org", "Archive/2025", true)
        .await
        .unwrap();
    d.set_subscribed("a@example.org", "INBOX", true)
        .await
        .unwrap();
    d.set_subscribed("b@example.org", "Other", true)
        .await
        .unwrap();
    assert_eq!(
        d.subscriptions("a@example.org").await.unwrap(),
        vec!["Archive/2025".to_string(), "INBOX".to_string()]
    );
    d.set_subscribed("a@example.org", "INBOX", false)
        .await
        .unwrap();
    d.set_subscribed("a@example.org", "never-there", false)
        .await
        .unwrap();
    assert_eq!(
        d.subscriptions("a@example.org").await.unwrap(),
        vec!["Archive/2025".to_string()]
    );
    let long = "x".repeat(crate::SUBSCRIPTION_BYTES_MAX + 1);
    assert!(matches!(
        d.set_subscribed("a@example.org", &long, true).await,
        Err(DirectoryError::Limit(_))
    ));
    d.del_user("b@example.org").await.unwrap();
    d.purged("b@example.org").await.unwrap();
    d.add_user("b@example.org", "pw-b-long-enough")
        .await
        .unwrap();
    assert!(d.subscriptions("b@example.org").await.unwrap().is_empty());
}

/// RFC 6154 3: the attributes CREATE gave a folder, replaced per folder, following renames
/// of the folder and its children, and going with the user.
#[tokio::test]
async fn special_uses_follow_folder_renames_and_go_with_the_user() {
    let f = Fixture::new().await;
    let d = &f.dir;
    d.add_domain("example.org").await.unwrap();
    d.add_user("a@example.org", "pw-a-long-enough")
        .await
        .unwrap();
    let a = "a@example.org";
    let set = |m: &'static str, attrs: &'static [&'static str]| async move {
        let attrs: Vec<String> = attrs.iter().map(|s| s.to_string()).collect();
        d.set_special_uses(a, m, &attrs).await
    };
    set("Sent Items", &["\\Sent"]).await.unwrap();
    set("Old", &["\\Archive"]).await.unwrap();
    set("Old/Junk", &["\\Junk", "\\Trash"]).await.unwrap();
    set("Oldies", &["\\Drafts"]).await.unwrap();
    d.special_uses_renamed(a, "Old", "Attic/Old").await.unwrap();
    let pairs = |v: Vec<(String, String)>| {
        v.into_iter()
            .map(|(m, a)| format!("{m}={a}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        pairs(d.special_uses(a).await.unwrap()),
        [
            "Attic/Old=\\Archive",
            "Attic/Old/Junk=\\Junk",
            "Attic/Old/Junk=\\Trash",
            "Oldies=\\Drafts",
            "Sent Items=\\Sent"
        ]
    );
    set("Attic/Old/Junk", &[]).await.unwrap();
    assert_eq!(d.special_uses(a).await.unwrap().len(), 3);
    let many: Vec<String> = (0..=crate::SPECIAL_USES_PER_USER_MAX)
        .map(|i| format!("\\A{i}"))
        .collect();
    assert!(matches!(
        d.set_special_uses(a, "X", &many).await,
        Err(DirectoryError::Limit(_))
    ));
    d.del_user(a).await.unwrap();
    d.purged(a).await.unwrap();
    d.add_user(a, "pw-a-long-enough").await.unwrap();
    assert!(d.special_uses(a).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_deleted_address_is_refused_until_its_mail_is_purged() {
    let f = Fixture::new().await;
    let d = &f.dir;
    d.add_domain("example.org").await.unwrap();
    d.add_user("a@example.org", "pw").await.unwrap();
    d.add_user("b@example.org", "pw").await.unwrap();
    assert_eq!(d.del_user("A@Example.org").await.unwrap(), "a@example.org");
    d.del_user("b@example.org").await.unwrap();
    assert_eq!(
        d.pending_deletions().await.unwrap(),
        vec!["a@example.org".to_string(), "b@example.org".to_string()]
    );
    let err = d.add_user("a@example.org", "pw").await.unwrap_err();
    assert!(matches!(err, DirectoryError::UserBeingDeleted(_)), "{err}");
    assert!(err.to_string().contains("still being removed"), "{err}");
    d.purged("a@example.org").await.unwrap();
    d.purged("a@example.org").await.unwrap();
    assert_eq!(
        d.pending_deletions().await.unwrap(),
        vec!["b@example.org".to_string()]
    );
    d.add_user("a@example.org", "pw").await.unwrap();
    // Deleted again before the first purge of b: still one row.
    assert!(d.add_user("b@example.org", "pw").await.is_err());
}

fn key(domain: &str, selector: &str, created_at: i64) -> crate::DkimKey {
    crate::DkimKey {
        domain: domain.into(),
        selector: selector.into(),
        algorithm: "ed25519".into(),
        private_key: format!("private {selector}"),
        public_key: format!("public {selector}"),
        created_at,
    }
}

#[tokio::test]
async fn the_newest_dkim_key_of_a_domain_signs_and_goes_with_the_domain() {
    let f = Fixture::new().await;
    let d = &f.dir;
    assert!(matches!(
        d.add_dkim_key(&key("example.org", "s1", 1)).await,
        Err(DirectoryError::NoSuchDomain(_))
    ));
    d.add_domain("example.org").await.unwrap();
    d.add_dkim_key(&key("Example.ORG", "S1", 1)).await.unwrap();
    assert_eq!(d.cache().dkim_key("example.org").unwrap().selector, "s1");
    d.add_dkim_key(&key("example.org", "s2", 2)).await.unwrap();
    assert_eq!(d.cache().dkim_key("EXAMPLE.org").unwrap().selector, "s2");
    assert!(matches!(
        d.add_dkim_key(&key("example.org", "s2", 3)).await,
        Err(DirectoryError::DkimKeyExists { .. })
    ));
    for bad in ["", "-a", "a-", "a.b", "a b", &"x".repeat(64)] {
        assert!(
            matches!(
                d.add_dkim_key(&key("example.org", bad, 3)).await,
                Err(DirectoryError::InvalidSelector(_))
            ),
            "{bad:?}"
        );
    }
    let keys = d.dkim_keys().await.unwrap();
    assert_eq!(
        keys.iter().map(|k| k.selector.as_str()).collect::<Vec<_>>(),
        ["s2", "s1"]
    );
    assert!(
        !format!("{:?}", keys[0]).contains("private s2"),
        "the key never shows"
    );
    d.del_dkim_key("example.org", "s2").await.unwrap();
    assert_eq!(d.cache().dkim_key("example.org").unwrap().selector, "s1");
    assert!(matches!(
        d.del_dkim_key("example.org", "s2").await,
        Err(DirectoryError::NoSuchDkimKey { .. })
    ));
    d.del_domain("example.org").await.unwrap();
    assert!(d.dkim_keys().await.unwrap().is_empty());
    assert!(d.cache().dkim_key("example.org").is_none());
}

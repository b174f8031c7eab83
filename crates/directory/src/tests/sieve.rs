//! Sieve scripts (RFC 5804's operations on the directory) and the rules' tracking rows.

use super::Fixture;
use crate::{Directory, DirectoryError, Options, ScriptInfo};

async fn with_user(options: Options) -> Fixture {
    let f = Fixture::with_options(options).await;
    f.dir.add_domain("example.org").await.unwrap();
    f.dir
        .add_user("a@example.org", "pw-a-long-enough")
        .await
        .unwrap();
    f
}

#[tokio::test]
async fn scripts_are_put_listed_activated_renamed_and_deleted() {
    let f = with_user(super::fast_options()).await;
    script_life(&f.dir).await;
}

/// Also run on PostgreSQL (`tests/cluster.rs`).
pub(crate) async fn script_life(d: &Directory) {
    if !d.cache().is_local_domain("example.org") {
        d.add_domain("example.org").await.unwrap();
        d.add_user("a@example.org", "pw-a-long-enough")
            .await
            .unwrap();
    }
    d.sieve_put("A@example.org", "main", "keep;").await.unwrap();
    d.sieve_put("a@example.org", "other", "discard;")
        .await
        .unwrap();
    assert!(d.cache().sieve_scripts("a@example.org").is_some());
    assert_eq!(
        d.cache().sieve_scripts("a@example.org").unwrap().active,
        None,
        "a new script is not active (RFC 5804 2.6)"
    );
    d.sieve_activate("a@example.org", Some("main"))
        .await
        .unwrap();
    let cached = d.cache().sieve_scripts("a@example.org").unwrap();
    assert_eq!(cached.active.as_deref(), Some("main"));
    assert_eq!(cached.get("main").map(|s| &**s), Some("keep;"));
    assert_eq!(
        d.sieve_list("a@example.org").await.unwrap(),
        vec![
            ScriptInfo {
                name: "main".into(),
                active: true,
                bytes: 5
            },
            ScriptInfo {
                name: "other".into(),
                active: false,
                bytes: 8
            }
        ]
    );
    // RFC 5804 2.10: the active script cannot be deleted.
    assert!(matches!(
        d.sieve_delete("a@example.org", "main").await,
        Err(DirectoryError::ScriptActive(_))
    ));
    // RFC 5804 2.11.1: a rename keeps the active mark; the new name must be free.
    assert!(matches!(
        d.sieve_rename("a@example.org", "main", "other").await,
        Err(DirectoryError::ScriptExists { .. })
    ));
    d.sieve_rename("a@example.org", "main", "renamed")
        .await
        .unwrap();
    assert_eq!(
        d.cache()
            .sieve_scripts("a@example.org")
            .unwrap()
            .active
            .as_deref(),
        Some("renamed")
    );
    // Replacing the active script keeps it active.
    d.sieve_put("a@example.org", "renamed", "stop;")
        .await
        .unwrap();
    assert_eq!(
        d.sieve_get("a@example.org", "renamed").await.unwrap(),
        "stop;"
    );
    assert!(
        d.cache()
            .sieve_scripts("a@example.org")
            .unwrap()
            .active
            .is_some(),
        "still active after a replace"
    );
    d.sieve_activate("a@example.org", None).await.unwrap();
    d.sieve_delete("a@example.org", "renamed").await.unwrap();
    assert!(matches!(
        d.sieve_get("a@example.org", "renamed").await,
        Err(DirectoryError::NoSuchScript { .. })
    ));
    assert!(matches!(
        d.sieve_activate("a@example.org", Some("gone")).await,
        Err(DirectoryError::NoSuchScript { .. })
    ));
    assert!(matches!(
        d.sieve_list("nobody@example.org").await,
        Err(DirectoryError::NoSuchUser(_))
    ));
}

#[tokio::test]
async fn script_names_counts_and_sizes_are_bounded() {
    let options = crate::Options {
        sieve_scripts_max: 2,
        sieve_script_bytes_max: 100,
        ..super::fast_options()
    };
    let f = with_user(options).await;
    let d = &f.dir;
    for bad in ["", "a\nb", "tab\there", "\u{2028}"] {
        assert!(
            matches!(
                d.sieve_put("a@example.org", bad, "keep;").await,
                Err(DirectoryError::InvalidScriptName { .. })
            ),
            "{bad:?}"
        );
    }
    d.sieve_put("a@example.org", "one", "keep;").await.unwrap();
    d.sieve_put("a@example.org", "two", "keep;").await.unwrap();
    // Replacing one is not one more.
    d.sieve_put("a@example.org", "two", "stop;").await.unwrap();
    assert!(matches!(
        d.sieve_put("a@example.org", "three", "keep;").await,
        Err(DirectoryError::Limit(_))
    ));
    assert!(matches!(
        d.sieve_have_space("a@example.org", "one", 101).await,
        Err(DirectoryError::Limit(_))
    ));
    d.sieve_have_space("a@example.org", "one", 100)
        .await
        .unwrap();
    assert!(matches!(
        d.sieve_have_space("a@example.org", "three", 10).await,
        Err(DirectoryError::Limit(_))
    ));
}

#[tokio::test]
async fn scripts_and_tracking_follow_a_rename_and_go_with_the_user() {
    let f = with_user(super::fast_options()).await;
    let d = &f.dir;
    d.sieve_put("a@example.org", "main", "keep;").await.unwrap();
    d.sieve_activate("a@example.org", Some("main"))
        .await
        .unwrap();
    d.sieve_track("a@example.org", "vacation:x", 2_000, 1_000)
        .await
        .unwrap();
    assert!(
        d.sieve_tracked("a@example.org", "vacation:x", 1_500)
            .await
            .unwrap()
    );
    assert!(
        !d.sieve_tracked("a@example.org", "vacation:x", 2_000)
            .await
            .unwrap()
    );
    let (old, new) = d
        .begin_rename("a@example.org", "b@example.org")
        .await
        .unwrap();
    d.finish_rename(&old, &new).await.unwrap();
    assert_eq!(d.sieve_get("b@example.org", "main").await.unwrap(), "keep;");
    assert!(
        d.sieve_tracked("b@example.org", "vacation:x", 1_500)
            .await
            .unwrap()
    );
    assert!(d.cache().sieve_scripts("b@example.org").is_some());
    assert!(d.cache().sieve_scripts("a@example.org").is_none());
}

#[tokio::test]
async fn global_scripts_are_cached_by_name() {
    let f = with_user(super::fast_options()).await;
    f.dir
        .sieve_put_global("spam", Some("discard;"))
        .await
        .unwrap();
    assert_eq!(
        f.dir.cache().sieve_global("spam").as_deref(),
        Some("discard;")
    );
    f.dir.sieve_put_global("spam", None).await.unwrap();
    assert!(f.dir.cache().sieve_global("spam").is_none());
}

#[tokio::test]
async fn a_secret_is_made_once_and_kept() {
    let f = with_user(super::fast_options()).await;
    let first = f.dir.secret("srs").await.unwrap();
    assert_eq!(first.len(), 64);
    assert_eq!(f.dir.secret("srs").await.unwrap(), first);
    assert_ne!(f.dir.secret("other").await.unwrap(), first);
}

//! The cache across handles: refresh on generation change, the refresher task, and
//! concurrent writers on one file.

use std::time::Duration;

use super::{Fixture, stored_generation};
use crate::{Resolution, Target};

/// Waits up to 10 s for `condition`; returns whether it became true. Not a timing test: the
/// bound only keeps a broken refresher from hanging the suite.
async fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    condition()
}

#[tokio::test]
async fn a_write_through_another_handle_shows_after_refresh() {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    let server = f.dir.cache();
    assert!(
        !server.refresh_if_changed().await.unwrap(),
        "own writes are already loaded"
    );

    let cli = f.second_handle().await;
    cli.add_user("new@example.org", "pw").await.unwrap();
    cli.set_quota("new@example.org", Some(10)).await.unwrap();
    // The CLI's own cache is current; the server's is not until it refreshes.
    assert_eq!(cli.cache().quota("new@example.org"), Some(10));
    assert_eq!(server.resolve("new@example.org"), Resolution::UnknownUser);
    assert_eq!(server.generation(), 1);

    assert!(server.refresh_if_changed().await.unwrap());
    assert_eq!(
        server.resolve("new@example.org"),
        Resolution::Local(vec![Target::User("new@example.org".into())])
    );
    assert_eq!(server.quota("new@example.org"), Some(10));
    assert_eq!(server.generation(), 3);
    assert!(!server.refresh_if_changed().await.unwrap());

    cli.add_domain("second.org").await.unwrap();
    assert!(!server.is_local_domain("second.org"));
    assert!(server.refresh_if_changed().await.unwrap());
    assert!(server.is_local_domain("second.org"));
}

#[tokio::test]
async fn a_restored_older_generation_still_reloads() {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    f.dir.add_domain("two.org").await.unwrap();
    // As if an older backup replaced the file: lower generation, different rows.
    sqlx::query("DELETE FROM domains WHERE name = 'two.org'")
        .execute(&f.dir.inner.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE meta SET value = 1 WHERE key = 'generation'")
        .execute(&f.dir.inner.pool)
        .await
        .unwrap();
    assert!(f.dir.cache().refresh_if_changed().await.unwrap());
    assert!(!f.dir.cache().is_local_domain("two.org"));
    assert_eq!(f.dir.cache().generation(), 1);
}

#[tokio::test]
async fn the_refresher_picks_up_other_writers_and_stops_with_the_directory() {
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    let refresher = f.dir.spawn_refresher(Duration::from_millis(100));
    let cli = f.second_handle().await;
    cli.add_alias("postmaster@example.org", "admin@remote.net")
        .await
        .unwrap();
    let server = f.dir.clone();
    assert!(
        eventually(|| server.cache().resolve("postmaster@example.org") != Resolution::UnknownUser)
            .await,
        "the refresher never loaded the CLI's alias"
    );
    drop(server);
    let Fixture { dir, .. } = f;
    drop(dir);
    tokio::time::timeout(Duration::from_secs(10), refresher)
        .await
        .expect("the refresher ends once the directory is dropped")
        .expect("the refresher does not panic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_on_two_handles_do_not_corrupt() {
    const TASKS_PER_HANDLE: usize = 4;
    const USERS_PER_TASK: usize = 10;
    let f = Fixture::new().await;
    f.dir.add_domain("example.org").await.unwrap();
    let cli = f.second_handle().await;

    let mut tasks = Vec::new();
    for (handle, dir) in [f.dir.clone(), cli.clone()].into_iter().enumerate() {
        for task in 0..TASKS_PER_HANDLE {
            let dir = dir.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0..USERS_PER_TASK {
                    let address = format!("u{handle}-{task}-{n}@example.org");
                    dir.add_user(&address, "pw").await.unwrap();
                    dir.add_alias(&format!("a{handle}-{task}-{n}@example.org"), &address)
                        .await
                        .unwrap();
                }
                // Everyone also races for the same address; exactly one wins overall.
                dir.add_user("contested@example.org", "pw").await.is_ok()
            }));
        }
    }
    let mut contested_wins = 0;
    for task in tasks {
        if task.await.unwrap() {
            contested_wins += 1;
        }
    }
    assert_eq!(contested_wins, 1);

    let users_count = 2 * TASKS_PER_HANDLE * USERS_PER_TASK;
    assert_eq!(f.dir.list_users(None).await.unwrap().len(), users_count + 1);
    assert_eq!(cli.list_aliases().await.unwrap().len(), users_count);
    // 1 domain, then a user and an alias each, then the contested user: failures bump nothing.
    let writes = 1 + 2 * users_count as i64 + 1;
    assert_eq!(stored_generation(&f.dir).await, writes);
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&f.dir.inner.pool)
        .await
        .unwrap();
    assert_eq!(integrity, "ok");

    for dir in [&f.dir, &cli] {
        dir.cache().refresh_if_changed().await.unwrap();
        assert_eq!(dir.cache().generation(), writes);
        assert_eq!(
            dir.cache().resolve("a1-3-9@example.org"),
            Resolution::Local(vec![Target::User("u1-3-9@example.org".into())])
        );
    }
}

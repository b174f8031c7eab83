//! The cluster tables (nodes, owners, moves) on SQLite and on a real private PostgreSQL
//! (test-peers' `Postgres`), and PostgreSQL's notifications and outages.

use std::time::{Duration, Instant};

use test_peers::Postgres;

use super::{Fixture, fast_options};
use crate::{Directory, DirectoryError, Location, Owner, Resolution, Target};

/// A private PostgreSQL, or `None` (with a message) when it is not installed.
fn postgres() -> Option<Postgres> {
    match Postgres::new() {
        Ok(pg) => Some(pg),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("start PostgreSQL: {e}"),
    }
}

async fn open_pg(pg: &Postgres) -> Directory {
    let mut options = fast_options();
    options.busy_timeout = Duration::from_secs(2);
    Directory::open_at(&Location::Postgres(pg.url()), options)
        .await
        .expect("open PostgreSQL directory")
}

/// How long `condition` took to become true, polling every 10 ms for up to 10 s.
async fn time_until(mut condition: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if condition() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// The same checks on either backend: nodes, placement, refusal, moves, owners in the cache.
async fn nodes_and_moves(dir: &Directory) {
    dir.add_domain("example.org").await.unwrap();
    // No nodes: the single-node setup, node stays NULL.
    assert_eq!(
        dir.add_user_on("solo@example.org", "pw", None)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        dir.cache().owner("solo@example.org"),
        Some(Owner {
            node: None,
            epoch: 1,
            frozen: false
        })
    );
    dir.add_node(
        "n1",
        "10.0.0.1:24",
        "10.0.0.1:143",
        "10.0.0.1:110",
        None,
        None,
    )
    .await
    .unwrap();
    // The first node takes the users the single server had.
    assert_eq!(
        dir.cache()
            .owner("solo@example.org")
            .unwrap()
            .node
            .as_deref(),
        Some("n1")
    );
    dir.add_node(
        "n2",
        "10.0.0.2:24",
        "10.0.0.2:143",
        "10.0.0.2:110",
        Some("10.0.0.2:80"),
        Some("10.0.0.2:4190"),
    )
    .await
    .unwrap();
    let listed = dir.list_nodes().await.unwrap();
    assert_eq!(listed[1].0.managesieve.as_deref(), Some("10.0.0.2:4190"));
    assert_eq!(
        dir.cache().node("n2").unwrap().managesieve.as_deref(),
        Some("10.0.0.2:4190")
    );
    assert_eq!(listed[0].0.managesieve, None);
    assert!(matches!(
        dir.add_node("n3", "a:1", "a:2", "a:3", None, Some("a b"))
            .await,
        Err(DirectoryError::InvalidNode { .. })
    ));
    assert!(matches!(
        dir.add_node("n1", "a:1", "a:2", "a:3", None, None).await,
        Err(DirectoryError::NodeExists(_))
    ));
    assert!(matches!(
        dir.add_node("N 1", "a:1", "a:2", "a:3", None, None).await,
        Err(DirectoryError::InvalidNode { .. })
    ));
    // Explicit node, then fewest-users placement (ties by name).
    assert_eq!(
        dir.add_user_on("a@example.org", "pw", Some("n1"))
            .await
            .unwrap()
            .as_deref(),
        Some("n1")
    );
    assert_eq!(
        dir.add_user_on("b@example.org", "pw", None)
            .await
            .unwrap()
            .as_deref(),
        Some("n2")
    );
    assert_eq!(
        dir.add_user_on("c@example.org", "pw", Some("n1"))
            .await
            .unwrap()
            .as_deref(),
        Some("n1")
    );
    assert!(matches!(
        dir.add_user_on("d@example.org", "pw", Some("n9")).await,
        Err(DirectoryError::NoSuchNode(_))
    ));
    let listed = dir.list_nodes().await.unwrap();
    let summary: Vec<(String, bool, u64)> = listed
        .iter()
        .map(|(n, users)| (n.name.clone(), n.up, *users))
        .collect();
    assert_eq!(summary, [("n1".into(), false, 3), ("n2".into(), false, 1)]);
    assert_eq!(listed[1].0.web.as_deref(), Some("10.0.0.2:80"));
    let user = dir.user("b@example.org").await.unwrap().unwrap();
    assert_eq!((user.node.as_deref(), user.epoch), (Some("n2"), 1));

    // Refused while owning users, with the count in one line.
    let err = dir.remove_node("n2").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "node n2 still owns 1 user(s); move them first"
    );

    // Leases: up by the database's clock, without a generation bump.
    let generation = dir.cache().generation();
    dir.renew_lease("n1", Duration::from_secs(30))
        .await
        .unwrap();
    dir.cache().refresh_node_states().await.unwrap();
    assert!(dir.cache().node_up("n1"));
    assert!(!dir.cache().node_up("n2"));
    assert!(dir.cache().node("n1").unwrap().up);
    assert_eq!(dir.cache().nodes().len(), 2);
    assert_eq!(dir.cache().generation(), generation);
    assert!(!dir.cache().refresh_if_changed().await.unwrap());
    assert!(matches!(
        dir.renew_lease("n9", Duration::from_secs(1)).await,
        Err(DirectoryError::NoSuchNode(_))
    ));

    // A move: frozen, then node and epoch switch together.
    dir.begin_move("b@example.org", "n1").await.unwrap();
    assert!(dir.cache().owner("b@example.org").unwrap().frozen);
    assert!(matches!(
        dir.begin_move("b@example.org", "n1").await,
        Err(DirectoryError::UserMoving(_))
    ));
    assert!(matches!(
        dir.finish_move("b@example.org", "n2").await,
        Err(DirectoryError::NotMoving { .. })
    ));
    assert_eq!(dir.finish_move("b@example.org", "n1").await.unwrap(), 2);
    assert_eq!(
        dir.cache().owner("B@example.org"),
        Some(Owner {
            node: Some("n1".into()),
            epoch: 2,
            frozen: false
        })
    );
    dir.begin_move("b@example.org", "n2").await.unwrap();
    dir.abort_move("b@example.org").await.unwrap();
    assert_eq!(
        dir.cache().owner("b@example.org"),
        Some(Owner {
            node: Some("n1".into()),
            epoch: 2,
            frozen: false
        })
    );
    // n2 owns nobody now.
    dir.remove_node("n2").await.unwrap();
    assert!(dir.cache().node("n2").is_none());
    assert!(matches!(
        dir.remove_node("n2").await,
        Err(DirectoryError::NoSuchNode(_))
    ));
    // Renames keep the owner.
    let (old, new) = dir
        .begin_rename("a@example.org", "z@example.org")
        .await
        .unwrap();
    dir.finish_rename(&old, &new).await.unwrap();
    assert_eq!(
        dir.cache().owner("z@example.org").unwrap().node.as_deref(),
        Some("n1")
    );
    assert!(
        dir.authenticate("z@example.org", "pw")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn nodes_and_moves_on_sqlite() {
    let f = Fixture::new().await;
    nodes_and_moves(&f.dir).await;
}

#[tokio::test]
async fn nodes_and_moves_on_postgres() {
    let Some(pg) = postgres() else { return };
    let dir = open_pg(&pg).await;
    nodes_and_moves(&dir).await;
}

#[tokio::test]
async fn admins_and_login_history_on_postgres() {
    let Some(pg) = postgres() else { return };
    let dir = open_pg(&pg).await;
    super::user_life::admins_and_login_history(&dir).await;
}

#[tokio::test]
async fn postgres_migrates_once_and_reopens() {
    let Some(pg) = postgres() else { return };
    // Two handles opening an empty database at once: the advisory lock makes them take turns.
    let (a, b) = tokio::join!(open_pg(&pg), open_pg(&pg));
    a.add_domain("example.org").await.unwrap();
    a.add_user("alice@example.org", "pw").await.unwrap();
    drop((a, b));
    let again = open_pg(&pg).await;
    let version: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'schema_version'")
        .fetch_one(&again.inner.pool)
        .await
        .unwrap();
    assert_eq!(version, crate::db::SCHEMA_VERSION);
    assert_eq!(again.list_users(None).await.unwrap().len(), 1);
    assert_eq!(
        again.cache().resolve("alice+tag@example.org"),
        Resolution::Local(vec![Target::User("alice@example.org".into())])
    );
    assert!(
        again
            .authenticate("alice@example.org", "pw")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        again.cache().resolve("postmaster@example.org"),
        again.cache().resolve("alice@example.org")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_changes_reach_other_handles_and_outages_keep_the_cache() {
    let Some(mut pg) = postgres() else { return };
    let a = open_pg(&pg).await;
    let b = open_pg(&pg).await;
    let refresher = b.spawn_refresher(Duration::from_secs(1));
    a.add_domain("example.org").await.unwrap();
    a.add_user("alice@example.org", "correct horse")
        .await
        .unwrap();

    // NOTIFY: well within a second (the backstop poll is 10 s).
    let took = time_until(|| b.cache().is_user("alice@example.org"))
        .await
        .expect("the change never reached the other handle");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    // A new password reaches the other handle's logins the same way.
    a.set_password("alice@example.org", "battery staple")
        .await
        .unwrap();
    let took = {
        let start = Instant::now();
        loop {
            if b.authenticate("alice@example.org", "battery staple")
                .await
                .unwrap()
                .is_some()
            {
                break start.elapsed();
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the new password never arrived"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    assert!(took < Duration::from_secs(1), "took {took:?}");

    // PostgreSQL down: the cache answers, logins work, writes fail with an error.
    pg.stop_immediate();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        b.cache().resolve("alice@example.org"),
        Resolution::Local(vec![Target::User("alice@example.org".into())])
    );
    assert!(
        b.authenticate("alice@example.org", "battery staple")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        b.authenticate("alice@example.org", "wrong")
            .await
            .unwrap()
            .is_none()
    );
    let err = a.add_user("bob@example.org", "pw").await.unwrap_err();
    assert!(matches!(err, DirectoryError::Database(_)), "{err}");
    assert!(!err.to_string().contains('\n'), "{err}");
    assert!(b.cache().refresh_if_changed().await.is_err());
    assert!(b.cache().is_user("alice@example.org"));

    // Back up: the listener reconnects and reloads, and changes flow again.
    pg.start().unwrap();
    a.add_user("bob@example.org", "pw").await.unwrap();
    let took = time_until(|| b.cache().is_user("bob@example.org"))
        .await
        .expect("no change reached the other handle after the restart");
    // The listener retries once a second (plus its connection attempt).
    assert!(took < Duration::from_secs(3), "took {took:?}");
    a.add_domain("two.org").await.unwrap();
    let took = time_until(|| b.cache().is_local_domain("two.org"))
        .await
        .unwrap();
    assert!(took < Duration::from_secs(1), "took {took:?}");
    refresher.abort();
}

/// A deleted user's mail is removed by its own node only.
async fn deletions_wait_for_the_owner(dir: &Directory) {
    dir.add_domain("example.org").await.unwrap();
    dir.add_node(
        "n1",
        "10.0.0.1:24",
        "10.0.0.1:143",
        "10.0.0.1:110",
        None,
        None,
    )
    .await
    .unwrap();
    dir.add_node(
        "n2",
        "10.0.0.2:24",
        "10.0.0.2:143",
        "10.0.0.2:110",
        None,
        None,
    )
    .await
    .unwrap();
    dir.add_user_on("a@example.org", "pw", Some("n2"))
        .await
        .unwrap();
    dir.del_user("a@example.org").await.unwrap();
    assert!(dir.pending_deletions_on("n1").await.unwrap().is_empty());
    assert_eq!(
        dir.pending_deletions_on("n2").await.unwrap(),
        ["a@example.org"]
    );
    assert_eq!(dir.pending_deletions().await.unwrap(), ["a@example.org"]);
    // Not free until the owner purged it.
    assert!(matches!(
        dir.add_user("a@example.org", "pw").await,
        Err(DirectoryError::UserBeingDeleted(_))
    ));
    dir.purged("a@example.org").await.unwrap();
    assert!(dir.pending_deletions_on("n2").await.unwrap().is_empty());
}

#[tokio::test]
async fn deletions_wait_for_the_owner_on_sqlite() {
    let f = Fixture::new().await;
    deletions_wait_for_the_owner(&f.dir).await;
}

#[tokio::test]
async fn deletions_wait_for_the_owner_on_postgres() {
    let Some(pg) = postgres() else { return };
    let dir = open_pg(&pg).await;
    deletions_wait_for_the_owner(&dir).await;
}

#[tokio::test]
async fn sieve_scripts_on_postgres() {
    let Some(pg) = postgres() else { return };
    let dir = open_pg(&pg).await;
    super::sieve::script_life(&dir).await;
    dir.sieve_track("a@example.org", "k", 2_000, 1_000)
        .await
        .unwrap();
    assert!(
        dir.sieve_tracked("a@example.org", "k", 1_500)
            .await
            .unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spam_state_on_postgres() {
    use super::spam;
    let Some(pg) = postgres() else { return };
    let dir = open_pg(&pg).await;
    let other = open_pg(&pg).await;
    spam::model_round_trip(&dir).await;
    spam::model_pruning(&dir).await;
    spam::trained_records(&dir).await;
    spam::reputation(&dir).await;
    spam::thresholds(&dir, &other).await;
    spam::deleted_user(&dir).await;
    spam::renamed_user(&dir).await;
    spam::greylisting(&dir).await;
    spam::concurrent_training(&dir, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_on_postgres() {
    use super::reports;
    let Some(pg) = postgres() else { return };
    let dir = open_pg(&pg).await;
    reports::counters(&dir).await;
    reports::rows_per_day_bound(&dir).await;
    reports::bad_keys(&dir).await;
    reports::sent_reports(&dir).await;
    reports::received_reports(&dir).await;
}

#[tokio::test]
async fn a_version_9_directory_gains_the_spam_tables_on_postgres() {
    let Some(pg) = postgres() else { return };
    let pool = crate::db::connect_postgres(&pg.url(), Duration::from_secs(5), 1)
        .await
        .unwrap();
    super::spam::make_version_9(&pool, crate::db::Backend::Postgres).await;
    pool.close().await;
    let dir = open_pg(&pg).await;
    super::spam::trains_after_the_upgrade(&dir).await;
}

/// Nodes write their login history in concurrent batches that share keys (a user who logs
/// in through several nodes): the batches never deadlock, and every attempt is counted
/// (issue 40: two batches were lost to deadlocks after a partition healed).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_login_batches_never_deadlock_and_count_every_attempt() {
    use crate::Attempt;
    use std::net::IpAddr;
    const ROUNDS: usize = 40;
    const USERS: usize = 3;
    const CLIENTS: usize = 6;
    let Some(pg) = postgres() else { return };
    let first = open_pg(&pg).await;
    first.add_domain("example.org").await.unwrap();
    for u in 0..USERS {
        first
            .add_user(&format!("u{u}@example.org"), "pw")
            .await
            .unwrap();
    }
    let nodes = [first, open_pg(&pg).await, open_pg(&pg).await];
    let mut noted = 0u64;
    for round in 0..ROUNDS {
        // Every node counts an attempt on every key; the orders differ from node to node
        // (and are a hash map's anyway) so the upserts meet in opposite orders.
        for (n, node) in nodes.iter().enumerate() {
            let mut keys: Vec<(usize, usize)> = (0..USERS)
                .flat_map(|u| (0..CLIENTS).map(move |c| (u, c)))
                .collect();
            if (n + round) % 2 == 1 {
                keys.reverse();
            }
            for (u, c) in keys {
                let client: IpAddr = format!("192.0.2.{c}").parse().unwrap();
                node.note_attempt(&format!("u{u}@example.org"), client, "imap", Attempt::Ok);
                noted += 1;
            }
        }
        let flushes: Vec<_> = nodes
            .iter()
            .map(|node| {
                let node = node.clone();
                tokio::spawn(async move { node.flush_attempts().await })
            })
            .collect();
        for (n, flush) in flushes.into_iter().enumerate() {
            let written = flush.await.unwrap();
            assert!(written.is_ok(), "round {round}, node {n}: {written:?}");
        }
    }
    let counted: i64 = sqlx::query_scalar("SELECT CAST(SUM(attempts) AS BIGINT) FROM logins")
        .fetch_one(&nodes[0].inner.pool)
        .await
        .unwrap();
    assert_eq!(counted, noted as i64, "every attempt counted once");
}

/// PostgreSQL away for longer than a lease: when it answers again every lease has lapsed by
/// its clock, live nodes' too. The poll keeps the nodes that were up, up, for one lease
/// after the database's return (so logins and deliveries are not refused while the others
/// renew), never shows this node down, and only then lets a lapsed lease mean down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_states_survive_a_database_outage_longer_than_a_lease() {
    const TTL: Duration = Duration::from_secs(2);
    let Some(mut pg) = postgres() else { return };
    let dir = open_pg(&pg).await;
    for node in ["n1", "n2", "n3"] {
        dir.add_node(
            node,
            "127.0.0.1:24",
            "127.0.0.1:143",
            "127.0.0.1:110",
            None,
            None,
        )
        .await
        .unwrap();
    }
    dir.renew_lease("n1", TTL).await.unwrap();
    dir.renew_lease("n2", TTL).await.unwrap();
    // This handle is n1's (the lease task is what tells the cache so; it is stopped here so
    // the test decides when leases are renewed).
    dir.spawn_lease("n1", Duration::from_secs(3600), TTL)
        .abort();
    dir.cache().refresh_node_states().await.unwrap();
    let states = |dir: &Directory| ["n1", "n2", "n3"].map(|n| dir.cache().node_up(n));
    assert_eq!(states(&dir), [true, true, false]);

    pg.stop_immediate();
    assert!(dir.cache().refresh_node_states().await.is_err());
    tokio::time::sleep(TTL + Duration::from_millis(500)).await;
    assert_eq!(
        states(&dir),
        [true, true, false],
        "the last known states stay"
    );
    pg.start().unwrap();
    let back = Instant::now();
    while dir.cache().refresh_node_states().await.is_err() {
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "PostgreSQL not back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answered = Instant::now();
    // Every lease has lapsed by the database's clock, and nobody renewed yet.
    assert_eq!(
        states(&dir),
        [true, true, false],
        "no node down for a lapsed lease"
    );
    // n2 renews meanwhile and stays up; n3 never was.
    dir.renew_lease("n2", Duration::from_secs(60))
        .await
        .unwrap();
    dir.cache().refresh_node_states().await.unwrap();
    assert_eq!(states(&dir), [true, true, false]);
    // n1's own lease is never renewed here: after the grace the others see it down, this
    // node never does. n2's lease holds.
    tokio::time::sleep(TTL.saturating_sub(answered.elapsed()) + Duration::from_millis(200)).await;
    dir.cache().refresh_node_states().await.unwrap();
    assert_eq!(states(&dir), [true, true, false], "n1 is this node");
    let other = open_pg(&pg).await;
    assert_eq!(
        states(&other),
        [false, true, false],
        "n1 as the others see it"
    );
}

//! Address resolution from the cache: the rules of `cache.rs` one by one.

use super::{Fixture, fast_options};
use crate::{ExpansionLimit, Options, Resolution, Target};

fn user(address: &str) -> Target {
    Target::User(address.into())
}

fn remote(address: &str) -> Target {
    Target::Remote(address.into())
}

fn local(targets: &[Target]) -> Resolution {
    Resolution::Local(targets.to_vec())
}

/// A directory with `example.org` and users `a`, `b`, `c`.
async fn fixture_with(options: Options) -> Fixture {
    let f = Fixture::with_options(options).await;
    f.dir.add_domain("example.org").await.unwrap();
    for name in ["a", "b", "c"] {
        f.dir
            .add_user(&format!("{name}@example.org"), "pw")
            .await
            .unwrap();
    }
    f
}

async fn fixture() -> Fixture {
    fixture_with(fast_options()).await
}

#[tokio::test]
async fn users_unknown_and_not_local() {
    let f = fixture().await;
    let cache = f.dir.cache();
    assert_eq!(
        cache.resolve("a@example.org"),
        local(&[user("a@example.org")])
    );
    assert_eq!(
        cache.resolve("A@Example.ORG"),
        local(&[user("a@example.org")])
    );
    assert_eq!(cache.resolve("zed@example.org"), Resolution::UnknownUser);
    assert_eq!(cache.resolve("a@elsewhere.org"), Resolution::NotLocal);
    assert!(cache.is_local_domain("EXAMPLE.org"));
    assert!(!cache.is_local_domain("elsewhere.org"));
}

#[tokio::test]
async fn postmaster_of_every_domain_reaches_someone() {
    // RFC 5321 4.5.1: without a user or alias of that name, the domain's oldest user.
    let f = fixture().await;
    let cache = f.dir.cache();
    let first = local(&[user("a@example.org")]);
    assert_eq!(cache.resolve("postmaster@example.org"), first);
    assert_eq!(cache.resolve("PostMaster@Example.org"), first);
    // RCPT TO:<Postmaster>: the first domain (by name) that has a user.
    assert_eq!(cache.resolve("postmaster"), first);
    // An alias or a user of that name comes first.
    f.dir
        .add_alias("postmaster@example.org", "c@example.org")
        .await
        .unwrap();
    assert_eq!(
        cache.resolve("postmaster@example.org"),
        local(&[user("c@example.org")])
    );
    // A domain without users has nobody to take it.
    f.dir.add_domain("empty.org").await.unwrap();
    assert_eq!(
        cache.resolve("postmaster@empty.org"),
        Resolution::UnknownUser
    );

    // A configured postmaster takes every domain's, and resolves like any address.
    let f = fixture_with(Options {
        postmaster: Some("b@example.org".into()),
        ..fast_options()
    })
    .await;
    f.dir.add_domain("other.org").await.unwrap();
    let cache = f.dir.cache();
    let b = local(&[user("b@example.org")]);
    assert_eq!(cache.resolve("postmaster@example.org"), b);
    assert_eq!(cache.resolve("postmaster@other.org"), b);
    // A configured postmaster@ of ours that is itself unconfigured cannot loop.
    let f = fixture_with(Options {
        postmaster: Some("postmaster@example.org".into()),
        ..fast_options()
    })
    .await;
    assert_eq!(
        f.dir.cache().resolve("postmaster@example.org"),
        Resolution::UnknownUser
    );
}

#[tokio::test]
async fn malformed_addresses() {
    let f = fixture().await;
    let cache = f.dir.cache();
    assert_eq!(cache.resolve("a b@example.org"), Resolution::UnknownUser);
    assert_eq!(cache.resolve("\"a\"@EXAMPLE.org"), Resolution::UnknownUser);
    assert_eq!(cache.resolve("a b@elsewhere.org"), Resolution::NotLocal);
    assert_eq!(cache.resolve(""), Resolution::NotLocal);
    let long = format!("{}@example.org", "a".repeat(65));
    assert_eq!(cache.resolve(&long), Resolution::UnknownUser);
}

#[tokio::test]
async fn subaddressing() {
    let f = fixture().await;
    let d = &f.dir;
    assert_eq!(
        d.cache().resolve("a+lists@example.org"),
        local(&[user("a@example.org")])
    );
    assert_eq!(
        d.cache().resolve("A+Lists+x@example.org"),
        local(&[user("a@example.org")])
    );
    assert_eq!(
        d.cache().resolve("a+@example.org"),
        local(&[user("a@example.org")])
    );
    assert_eq!(d.cache().resolve("+a@example.org"), Resolution::UnknownUser);
    assert_eq!(
        d.cache().resolve("zed+x@example.org"),
        Resolution::UnknownUser
    );

    // An exact user or alias wins over the base.
    d.add_user("a+special@example.org", "pw").await.unwrap();
    assert_eq!(
        d.cache().resolve("a+special@example.org"),
        local(&[user("a+special@example.org")])
    );
    d.add_alias_unchecked("a+fwd@example.org", "x@remote.net")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("a+fwd@example.org"),
        local(&[remote("x@remote.net")])
    );

    // The base may be an alias.
    d.add_alias_unchecked("sales@example.org", "b@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("sales+q3@example.org"),
        local(&[user("b@example.org")])
    );
    // Destinations are subaddressed too.
    d.add_alias_unchecked("tagged@example.org", "c+from-tagged@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("tagged@example.org"),
        local(&[user("c@example.org")])
    );
}

#[tokio::test]
async fn aliases_expand_recursively_and_keep_remote_case() {
    let f = fixture().await;
    let d = &f.dir;
    d.add_alias_unchecked("team@example.org", "a@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("team@example.org", "sub@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("sub@example.org", "B@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("sub@example.org", "Partner@Remote.NET")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("TEAM@example.org"),
        local(&[
            user("a@example.org"),
            user("b@example.org"),
            remote("Partner@remote.net")
        ])
    );
}

#[tokio::test]
async fn an_alias_shadows_a_user_and_can_keep_a_copy() {
    let f = fixture().await;
    let d = &f.dir;
    d.add_alias_unchecked("a@example.org", "x@remote.net")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("a@example.org"),
        local(&[remote("x@remote.net")])
    );
    // a -> a delivers to the mailbox: the alias is not expanded inside itself.
    d.add_alias_unchecked("a@example.org", "a@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("a@example.org"),
        local(&[user("a@example.org"), remote("x@remote.net")])
    );
    // Subaddresses of a go the same way (alias of the base).
    assert_eq!(
        d.cache().resolve("a+tag@example.org"),
        local(&[user("a@example.org"), remote("x@remote.net")])
    );
}

#[tokio::test]
async fn catch_all() {
    let f = fixture().await;
    let d = &f.dir;
    d.add_alias_unchecked("@example.org", "c@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("anything@example.org"),
        local(&[user("c@example.org")])
    );
    assert_eq!(
        d.cache().resolve("a@example.org"),
        local(&[user("a@example.org")])
    );
    assert_eq!(
        d.cache().resolve("a+x@example.org"),
        local(&[user("a@example.org")])
    );
    // An alias to a missing address falls to the catch-all too.
    d.add_alias_unchecked("old@example.org", "gone@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("old@example.org"),
        local(&[user("c@example.org")])
    );
    // A catch-all to a remote address.
    d.add_domain("other.org").await.unwrap();
    d.add_alias_unchecked("@other.org", "Someone@Remote.net")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("x@OTHER.org"),
        local(&[remote("Someone@remote.net")])
    );
}

#[tokio::test]
async fn a_catch_all_to_a_missing_local_address_is_unknown_not_a_loop() {
    let f = fixture().await;
    let d = &f.dir;
    d.add_alias_unchecked("@example.org", "nobody@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("zed@example.org"),
        Resolution::UnknownUser
    );
    assert_eq!(
        d.cache().resolve("nobody@example.org"),
        Resolution::UnknownUser
    );
    assert_eq!(
        d.cache().resolve("b@example.org"),
        local(&[user("b@example.org")])
    );
}

#[tokio::test]
async fn cycles_end() {
    let f = fixture().await;
    let d = &f.dir;
    // Two aliases pointing at each other with nobody to deliver to: unknown, not a hang.
    d.add_alias_unchecked("x@example.org", "y@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("y@example.org", "x@example.org")
        .await
        .unwrap();
    assert_eq!(d.cache().resolve("x@example.org"), Resolution::UnknownUser);
    // A cycle through a user delivers to that user once.
    d.add_alias_unchecked("a@example.org", "p@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("p@example.org", "a@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("p@example.org", "b@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("a@example.org"),
        local(&[user("a@example.org"), user("b@example.org")])
    );
    // From p, the user a is shadowed by its alias a -> p, and p is not expanded inside
    // itself: only b is left. (a's mailbox is reached only when a's own alias loops back.)
    assert_eq!(
        d.cache().resolve("p@example.org"),
        local(&[user("b@example.org")])
    );
    // A longer ring.
    d.add_alias_unchecked("r1@example.org", "r2@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("r2@example.org", "r3@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("r3@example.org", "r1@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("r3@example.org", "c@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("r2@example.org"),
        local(&[user("c@example.org")])
    );
}

#[tokio::test]
async fn targets_are_deduplicated() {
    let f = fixture().await;
    let d = &f.dir;
    // A diamond: all -> {l1, l2}, both -> a and x@remote.
    for list in ["l1", "l2"] {
        d.add_alias_unchecked("all@example.org", &format!("{list}@example.org"))
            .await
            .unwrap();
        d.add_alias_unchecked(&format!("{list}@example.org"), "a@example.org")
            .await
            .unwrap();
        d.add_alias_unchecked(&format!("{list}@example.org"), "x@remote.net")
            .await
            .unwrap();
    }
    d.add_alias_unchecked("all@example.org", "A+dup@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("all@example.org"),
        local(&[user("a@example.org"), remote("x@remote.net")])
    );
}

#[tokio::test]
async fn dangling_destinations_are_skipped() {
    let f = fixture().await;
    let d = &f.dir;
    d.add_alias_unchecked("list@example.org", "gone@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("list@example.org"),
        Resolution::UnknownUser
    );
    d.add_alias_unchecked("list@example.org", "b@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("list@example.org"),
        local(&[user("b@example.org")])
    );
    // A deleted user leaves its aliases dangling.
    d.add_alias_unchecked("fwd@example.org", "c@example.org")
        .await
        .unwrap();
    d.del_user("c@example.org").await.unwrap();
    assert_eq!(
        d.cache().resolve("fwd@example.org"),
        Resolution::UnknownUser
    );
    assert_eq!(d.cache().quota("c@example.org"), None);
}

#[tokio::test]
async fn expansion_targets_max() {
    let f = fixture_with(Options {
        expansion_targets_max: 4,
        ..fast_options()
    })
    .await;
    let d = &f.dir;
    for n in 0..2 {
        d.add_alias_unchecked("l1@example.org", &format!("m{n}@remote.net"))
            .await
            .unwrap();
        d.add_alias_unchecked("l2@example.org", &format!("n{n}@remote.net"))
            .await
            .unwrap();
    }
    d.add_alias_unchecked("all@example.org", "l1@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("all@example.org", "l2@example.org")
        .await
        .unwrap();
    // Exactly 4 targets: fine.
    let Resolution::Local(targets) = d.cache().resolve("all@example.org") else {
        panic!("expected local");
    };
    assert_eq!(targets.len(), 4);
    // A duplicate does not count.
    d.add_alias_unchecked("all@example.org", "m0@remote.net")
        .await
        .unwrap();
    assert!(matches!(d.cache().resolve("all@example.org"), Resolution::Local(t) if t.len() == 4));
    // The fifth distinct one is over the limit.
    d.add_alias_unchecked("l2@example.org", "n2@remote.net")
        .await
        .unwrap();
    assert_eq!(
        d.cache().try_resolve("all@example.org"),
        Err(ExpansionLimit::Targets)
    );
    // resolve refuses the address rather than dropping some of its targets.
    assert_eq!(
        d.cache().resolve("all@example.org"),
        Resolution::UnknownUser
    );
    assert!(matches!(d.cache().resolve("l2@example.org"), Resolution::Local(t) if t.len() == 3));
}

#[tokio::test]
async fn expansion_depth_max() {
    let f = fixture_with(Options {
        expansion_depth_max: 3,
        ..fast_options()
    })
    .await;
    let d = &f.dir;
    // d1 -> d2 -> d3 -> a: three aliases deep.
    d.add_alias_unchecked("d1@example.org", "d2@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("d2@example.org", "d3@example.org")
        .await
        .unwrap();
    d.add_alias_unchecked("d3@example.org", "a@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().resolve("d1@example.org"),
        local(&[user("a@example.org")])
    );
    // d0 -> d1 makes four.
    d.add_alias_unchecked("d0@example.org", "d1@example.org")
        .await
        .unwrap();
    assert_eq!(
        d.cache().try_resolve("d0@example.org"),
        Err(ExpansionLimit::Depth)
    );
    assert_eq!(d.cache().resolve("d0@example.org"), Resolution::UnknownUser);
    assert_eq!(
        d.cache().resolve("d1@example.org"),
        local(&[user("a@example.org")])
    );
}

#[tokio::test]
async fn default_limits_hold_at_their_edges() {
    let f = fixture().await;
    let d = &f.dir;
    let options = Options::default();
    // A chain of exactly expansion_depth_max aliases.
    for n in 0..options.expansion_depth_max {
        d.add_alias_unchecked(
            &format!("c{n}@example.org"),
            &format!("c{}@example.org", n + 1),
        )
        .await
        .unwrap();
    }
    d.add_alias_unchecked(
        &format!("c{}@example.org", options.expansion_depth_max),
        "a@example.org",
    )
    .await
    .unwrap();
    assert_eq!(
        d.cache().resolve("c1@example.org"),
        local(&[user("a@example.org")])
    );
    assert_eq!(
        d.cache().try_resolve("c0@example.org"),
        Err(ExpansionLimit::Depth)
    );
    // One alias with exactly expansion_targets_max remote destinations.
    for n in 0..options.expansion_targets_max {
        d.add_alias_unchecked("big@example.org", &format!("m{n}@remote.net"))
            .await
            .unwrap();
    }
    assert!(matches!(
        d.cache().try_resolve("big@example.org"),
        Ok(Resolution::Local(t)) if t.len() == options.expansion_targets_max
    ));
}

/// `is_user` answers for mailboxes only: an alias that shadows a user's address does not hide
/// the user from it, and aliases, unknown and remote addresses are not users.
#[tokio::test]
async fn is_user_sees_mailboxes_not_aliases() {
    let f = fixture().await;
    f.dir
        .add_alias_unchecked("a@example.org", "b@example.org")
        .await
        .unwrap();
    f.dir
        .add_alias_unchecked("list@example.org", "c@example.org")
        .await
        .unwrap();
    let cache = f.dir.cache();
    assert_eq!(
        cache.resolve("a@example.org"),
        local(&[user("b@example.org")])
    );
    assert!(cache.is_user("a@example.org"));
    assert!(cache.is_user("B@Example.ORG"));
    assert!(!cache.is_user("list@example.org"));
    assert!(!cache.is_user("nobody@example.org"));
    assert!(!cache.is_user("a@elsewhere.test"));
}

//! Folders, append, read, flags, expunge, reopen: the store's everyday behaviour.

mod common;

use common::*;
use disk::SimDisk;
use store::{AppendRequest, FlagOp, Flags, Mailstore, StoreError};

#[test]
fn append_read_reopen() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    let a = store.append("alice", "inbox", message(1, 3000)).unwrap();
    assert_eq!(a.uid, 1);
    let b = store.append("alice", "INBOX", message(2, 100)).unwrap();
    assert_eq!(b.uid, 2);
    assert!(b.modseq > a.modseq);
    assert_eq!(store.read("alice", "INBOX", 1).unwrap(), body(1, 3000));
    assert_eq!(
        store.read_range("alice", "INBOX", 1, 10, 20).unwrap(),
        body(1, 3000)[10..30].to_vec()
    );
    let s = store.summary("alice", "INBOX", 1).unwrap();
    assert_eq!(s.subject, "message 1");
    assert_eq!(s.message_id, "1@test");
    assert_eq!(s.size, 3000);
    let st = store.status("alice", "INBOX").unwrap();
    assert_eq!((st.messages, st.bytes, st.uidnext), (2, 3100, 3));
    assert_clean(&store);
    drop(store);
    disk.crash(1, 0.0);
    let store = open(&disk, small_config());
    assert_eq!(store.read("alice", "INBOX", 1).unwrap(), body(1, 3000));
    assert_eq!(store.read("alice", "INBOX", 2).unwrap(), body(2, 100));
    assert_eq!(store.status("alice", "INBOX").unwrap(), st);
    assert_clean(&store);
}

#[test]
fn large_messages_written_from_their_own_buffers_read_back() {
    // A content of at least 1 MiB is written from its own buffer (head, content, padding),
    // not through a record buffer; alone and in a batch with small ones, it must read back.
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    let sizes = [(1 << 20) + 7, 300, (3 << 20) + 1, 1000];
    let appended = store.append_batch(
        sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| AppendRequest {
                user: "alice".to_string(),
                folder: "INBOX".to_string(),
                message: message(i as u64, len),
            })
            .collect(),
    );
    let uids: Vec<u32> = appended.into_iter().map(|a| a.unwrap().uid).collect();
    let alone = store.append("alice", "INBOX", message(9, 2 << 20)).unwrap();
    let check = |store: &store::Store| {
        for (i, &len) in sizes.iter().enumerate() {
            assert!(store.read("alice", "INBOX", uids[i]).unwrap() == body(i as u64, len));
            let s = store.summary("alice", "INBOX", uids[i]).unwrap();
            assert_eq!((s.subject, s.size), (format!("message {i}"), len as u64));
        }
        assert!(store.read("alice", "INBOX", alone.uid).unwrap() == body(9, 2 << 20));
        assert_clean(store);
    };
    check(&store);
    drop(store);
    disk.crash(3, 0.0);
    check(&open(&disk, small_config()));
}

#[test]
fn folders_flags_expunge() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    assert!(matches!(
        store.append("bob", "Work", message(1, 10)),
        Err(StoreError::NoSuchUser(_))
    ));
    store.create_folder("bob", "Work").unwrap();
    assert!(matches!(
        store.create_folder("bob", "Work"),
        Err(StoreError::FolderExists { .. })
    ));
    assert!(matches!(
        store.append("bob", "Other", message(1, 10)),
        Err(StoreError::NoSuchFolder { .. })
    ));
    for i in 0..10 {
        store.append("bob", "Work", message(i, 700)).unwrap();
    }
    let m = store
        .set_flags(
            "bob",
            "Work",
            &[2, 3, 99],
            FlagOp::Add,
            Flags::SEEN | Flags::FLAGGED,
            &["$Junk".into()],
        )
        .unwrap();
    let view = store.open_folder("bob", "Work").unwrap();
    assert_eq!(view.messages.len(), 10);
    assert_eq!(view.messages[1].flags, Flags::SEEN | Flags::FLAGGED);
    assert_eq!(view.messages[1].keywords, vec!["$Junk".to_string()]);
    assert_eq!(view.messages[1].modseq, m);
    assert_eq!(view.status.highest_modseq, m);
    let r = store.expunge("bob", "Work", &[1, 5, 77]).unwrap();
    assert_eq!(r.expunged, 2);
    assert!(matches!(
        store.read("bob", "Work", 5),
        Err(StoreError::NoSuchMessage { .. })
    ));
    let r = store.expunge_below("bob", "Work", 4).unwrap();
    assert_eq!(r.expunged, 2);
    assert_eq!(store.status("bob", "Work").unwrap().messages, 6);
    store.rename_folder("bob", "Work", "Archive/2024").unwrap();
    assert_eq!(store.list_folders("bob"), vec!["Archive/2024".to_string()]);
    store.append("bob", "inbox", message(50, 10)).unwrap();
    assert_eq!(store.list_users(), vec!["bob".to_string()]);
    assert_clean(&store);
    drop(store);
    let store = open(&disk, small_config());
    let v2 = store.open_folder("bob", "Archive/2024").unwrap();
    assert_eq!(v2.messages.len(), 6);
    assert_eq!(v2.messages[0].uid, 4);
    assert_eq!(v2.messages[0].flags, Flags::EMPTY);
    store.delete_folder("bob", "Archive/2024").unwrap();
    assert!(store.status("bob", "Archive/2024").is_err());
    let r = store.expunge_all("bob", "INBOX").unwrap();
    assert_eq!(r.expunged, 1);
    assert_clean(&store);
    let stats = store.stats();
    assert_eq!(stats.used_bytes, 0);
}

#[test]
fn batch_from_many_users() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    let reqs: Vec<AppendRequest> = (0..50)
        .map(|i| AppendRequest {
            user: format!("u{}", i % 5),
            folder: "INBOX".into(),
            message: message(i, 600),
        })
        .collect();
    let before = disk.stats();
    let res = store.append_batch(reqs);
    let after = disk.stats();
    assert!(res.iter().all(|r| r.is_ok()));
    // One sync round: volume + journal.
    assert_eq!(after.syncs - before.syncs, 2);
    assert_eq!(store.stats().batches, 1);
    for i in 0..50u64 {
        let uid = res[i as usize].as_ref().unwrap().uid;
        assert_eq!(
            store.read(&format!("u{}", i % 5), "INBOX", uid).unwrap(),
            body(i, 600)
        );
    }
    assert_clean(&store);
}

#[test]
fn changes_since_uids_and_the_observer_see_every_committed_change() {
    use std::sync::{Arc, Mutex};
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    store.set_observer(Arc::new(move |user: &str| {
        log.lock().unwrap().push(user.to_string())
    }));
    store.append("alice", "INBOX", message(1, 100)).unwrap();
    store.append("alice", "INBOX", message(2, 100)).unwrap();
    let base = store.status("alice", "INBOX").unwrap().highest_modseq;
    store.append("bob", "INBOX", message(3, 100)).unwrap();
    let m = store
        .set_flags("alice", "INBOX", &[1], FlagOp::Add, Flags::SEEN, &[])
        .unwrap();
    store.append("alice", "INBOX", message(4, 100)).unwrap();
    let changes = store.changes_since("alice", "INBOX", base).unwrap();
    let changed: Vec<(u32, u64)> = changes.changed.iter().map(|c| (c.uid, c.modseq)).collect();
    assert_eq!(changed, vec![(1, m), (3, m + 1)]);
    assert_eq!(changes.status.messages, 3);
    let none = store
        .changes_since("alice", "INBOX", changes.status.highest_modseq)
        .unwrap();
    assert!(none.changed.is_empty());
    store.expunge("alice", "INBOX", &[2]).unwrap();
    assert_eq!(store.uids("alice", "INBOX").unwrap(), vec![1, 3]);
    let users = seen.lock().unwrap().clone();
    assert_eq!(
        users,
        vec!["alice", "alice", "bob", "alice", "alice", "alice"]
    );
    assert!(store.summary("alice", "INBOX", 1).unwrap().structure.len() > 10);
    let (summary, content) = store.read_with_summary("alice", "INBOX", 3).unwrap();
    assert_eq!(summary, store.summary("alice", "INBOX", 3).unwrap());
    assert_eq!(content, store.read("alice", "INBOX", 3).unwrap());
}

#[test]
fn creating_a_deep_folder_creates_its_parents_in_one_step_or_nothing() {
    let disk = SimDisk::new();
    let config = store::StoreConfig {
        folders_per_user_max: 5,
        folder_depth_max: 4,
        ..small_config()
    };
    let store = open(&disk, config.clone());
    store.create_folder("u", "INBOX").unwrap();
    store.create_folder_path("u", "a/b/c").unwrap();
    assert_eq!(store.list_folders("u"), ["INBOX", "a", "a/b", "a/b/c"]);
    assert!(matches!(
        store.create_folder_path("u", "a/b/c"),
        Err(StoreError::FolderExists { .. })
    ));
    // Too deep: nothing is created, not even the parents that would fit.
    assert!(matches!(
        store.create_folder_path("u", "x/y/z/w/v"),
        Err(StoreError::InvalidName { .. })
    ));
    // Over the folder limit with its parents (4 + 2 > 5): nothing either.
    assert!(matches!(
        store.create_folder_path("u", "p/q"),
        Err(StoreError::Limit { .. })
    ));
    assert_eq!(store.list_folders("u").len(), 4);
    store.create_folder_path("u", "a/b/d").unwrap();
    assert!(matches!(
        store.create_folder_path("u", "a/e"),
        Err(StoreError::Limit { .. })
    ));
    assert_clean(&store);
    drop(store);
    let store = open(&disk, config);
    assert_eq!(
        store.list_folders("u"),
        ["INBOX", "a", "a/b", "a/b/c", "a/b/d"]
    );
}

#[test]
fn deleting_a_user_removes_every_folder_and_frees_its_space_durably() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    for i in 0..20 {
        store.append("gone", "INBOX", message(i, 2000)).unwrap();
        store
            .append("kept", "INBOX", message(100 + i, 500))
            .unwrap();
    }
    store.create_folder_path("gone", "Archive/2024").unwrap();
    let used = store.stats().used_bytes;
    let deleted = store.delete_user("gone").unwrap();
    assert_eq!(
        (deleted.folders, deleted.messages, deleted.bytes),
        (3, 20, 40_000)
    );
    assert!(store.list_folders("gone").is_empty());
    assert_eq!(store.list_users(), ["kept"]);
    assert!(store.stats().used_bytes < used);
    assert_eq!(store.delete_user("gone").unwrap().folders, 0, "idempotent");
    assert_clean(&store);
    drop(store);
    // A power cut after it returned: still gone.
    disk.crash(7, 0.0);
    let store = open(&disk, small_config());
    assert!(store.list_folders("gone").is_empty());
    assert_eq!(store.status("kept", "INBOX").unwrap().messages, 20);
    // The address starts empty.
    store.append("gone", "INBOX", message(999, 10)).unwrap();
    assert_eq!(store.status("gone", "INBOX").unwrap().messages, 1);
    assert_clean(&store);
}

#[test]
fn renaming_a_user_keeps_folders_uids_and_data_durably() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    for i in 0..5 {
        store.append("old", "INBOX", message(i, 1000)).unwrap();
    }
    store.create_folder_path("old", "Archive/2024").unwrap();
    store
        .append("old", "Archive/2024", message(50, 300))
        .unwrap();
    store.append("other", "INBOX", message(60, 10)).unwrap();
    let inbox = store.status("old", "INBOX").unwrap();
    assert_eq!(
        store.usage("old"),
        store::Usage {
            folders: 3,
            messages: 6,
            bytes: 5300
        }
    );
    // The target must not have folders of its own.
    assert!(matches!(
        store.rename_user("old", "other"),
        Err(StoreError::Invalid(_))
    ));
    let moved = store.rename_user("old", "new").unwrap();
    assert_eq!((moved.folders, moved.messages, moved.bytes), (3, 6, 5300));
    assert!(store.list_folders("old").is_empty());
    assert_eq!(store.usage("old"), store::Usage::default());
    assert_eq!(
        store.list_folders("new"),
        ["Archive", "Archive/2024", "INBOX"]
    );
    assert_eq!(store.status("new", "INBOX").unwrap(), inbox);
    assert_eq!(store.read("new", "INBOX", 3).unwrap(), body(2, 1000));
    // Renaming a user that has nothing is a no-op (a rename finished before a crash).
    assert_eq!(
        store.rename_user("old", "new").unwrap(),
        store::Usage::default()
    );
    assert_clean(&store);
    // Replayed from the journal after a power cut...
    drop(store);
    disk.crash(3, 0.0);
    let store = open(&disk, small_config());
    assert_eq!(store.list_users(), ["new", "other"]);
    assert_eq!(store.status("new", "INBOX").unwrap(), inbox);
    assert_eq!(store.read("new", "Archive/2024", 1).unwrap(), body(50, 300));
    // ... and from a checkpoint.
    store.checkpoint().unwrap();
    drop(store);
    let store = open(&disk, small_config());
    assert_eq!(store.usage("new").messages, 6);
    // The old name starts empty, and the new one takes mail as before.
    store.append("old", "INBOX", message(70, 10)).unwrap();
    assert_eq!(store.status("old", "INBOX").unwrap().uidnext, 2);
    assert_eq!(
        store.append("new", "INBOX", message(71, 10)).unwrap().uid,
        6
    );
    assert_clean(&store);
}

/// A message list's page: newest first, anchored below a UID, with the unseen count, and a
/// preview in each summary.
#[test]
fn pages_are_newest_first_below_an_anchor() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    for i in 1..=5 {
        store.append("alice", "INBOX", message(i, 200)).unwrap();
    }
    store
        .set_flags("alice", "INBOX", &[2, 4], FlagOp::Add, Flags::SEEN, &[])
        .unwrap();
    let uids = |page: &store::Page| page.messages.iter().map(|m| m.uid).collect::<Vec<_>>();
    let first = store.page("alice", "INBOX", None, 2).unwrap();
    assert_eq!(uids(&first), vec![5, 4]);
    assert_eq!((first.status.messages, first.unseen), (5, 3));
    assert_eq!(
        uids(&store.page("alice", "INBOX", Some(4), 10).unwrap()),
        vec![3, 2, 1]
    );
    assert!(
        store
            .page("alice", "INBOX", Some(1), 10)
            .unwrap()
            .messages
            .is_empty()
    );
    assert!(store.page("alice", "Nope", None, 10).is_err());
    assert!(
        !store
            .summary("alice", "INBOX", 5)
            .unwrap()
            .preview
            .is_empty()
    );
}

/// `Store::summaries` serves a folder as the caller knows it: after the folder is deleted and
/// created again (a new UIDVALIDITY), the old UIDs name nothing, even where the new folder
/// has messages with the same UIDs; the new UIDVALIDITY reads the new messages.
#[test]
fn summaries_are_keyed_by_uidvalidity() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    store.append("alice", "Box", message(1, 100)).unwrap_err();
    store.create_folder("alice", "Box").unwrap();
    let old = store.append("alice", "Box", message(1, 100)).unwrap();
    let cached = store.summaries("alice", "Box", old.uidvalidity, &[1, 2]);
    assert_eq!(cached[0].as_ref().unwrap().subject, "message 1");
    assert!(cached[1].is_none(), "no UID 2");
    store.delete_folder("alice", "Box").unwrap();
    store.create_folder("alice", "Box").unwrap();
    let new = store.append("alice", "Box", message(2, 100)).unwrap();
    assert_eq!(new.uid, 1);
    store.append("alice", "Box", message(3, 100)).unwrap();
    assert_ne!(new.uidvalidity, old.uidvalidity);
    // UID 1 under the old UIDVALIDITY is the cached old message or nothing, never the new one.
    let stale = store.summaries("alice", "Box", old.uidvalidity, &[1, 2]);
    assert!(stale[1].is_none(), "UID 2 is the new folder's message 3");
    assert!(stale[0].as_ref().is_none_or(|s| s.subject == "message 1"));
    let fresh = store.summaries("alice", "Box", new.uidvalidity, &[1]);
    assert_eq!(fresh[0].as_ref().unwrap().subject, "message 2");
    assert!(store.summary_cache_bytes() > 0);
}

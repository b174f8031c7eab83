//! Backups of a real queue and store on files (offline: no server), taken, verified,
//! damaged and restored.

use std::path::Path;
use std::sync::Arc;

use store::{AppendRequest, FlagOp, Flags, Mailstore as _, NewMessage, Store};

use super::*;

struct Engines {
    queue: queue::Queue,
    store: Arc<Store>,
}

fn open(data: &Path) -> Engines {
    let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
    for d in ["queue", "store"] {
        std::fs::create_dir_all(data.join(d)).unwrap();
    }
    let (queue, _) = queue::Queue::open(
        disk.clone(),
        &data.join("queue"),
        queue::QueueConfig::default(),
    )
    .unwrap();
    let (store, _) = Store::open(disk, &data.join("store"), store::StoreConfig::default()).unwrap();
    Engines { queue, store }
}

fn message(n: u32) -> Vec<u8> {
    format!("Subject: message {n}\r\n\r\nbody {n}\r\n").into_bytes()
}

fn append(store: &Store, user: &str, folder: &str, n: u32) -> u32 {
    let r = store.append_batch(vec![AppendRequest {
        user: user.into(),
        folder: folder.into(),
        message: NewMessage {
            internal_date: 1_700_000_000 + n as i64,
            content: message(n),
            ..NewMessage::default()
        },
    }]);
    r.into_iter().next().unwrap().unwrap().uid
}

fn take_offline(
    e: &Engines,
    data: &Path,
    dest: &Path,
    files: Vec<(String, std::path::PathBuf)>,
) -> Summary {
    let no_directory = |_: &Path| -> anyhow::Result<bool> { Ok(false) };
    let sources = Sources {
        data_dir: data,
        queue: &e.queue,
        store: &e.store,
        running: None,
        directory: &no_directory,
        files,
        cancel: None,
    };
    take(&sources, dest, &mut |_| {}).unwrap()
}

fn envelope(to: &str) -> queue::Envelope {
    queue::Envelope {
        sender: "x@elsewhere.test".into(),
        recipients: vec![queue::Recipient {
            address: to.into(),
            status: queue::RecipientStatus::Pending,
            last_error: None,
        }],
        arrival_ms: 1_700_000_000_000,
    }
}

/// Every folder of a store as (user, folder, UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ) and its
/// messages (UID, flags, keywords, MODSEQ, content).
type Folders = Vec<(
    (String, String, u32, u32, u64),
    Vec<(u32, Flags, Vec<String>, u64, Vec<u8>)>,
)>;

fn contents(store: &Store) -> Folders {
    let mut out = Vec::new();
    for user in store.list_users() {
        let mut folders = store.list_folders(&user);
        folders.sort();
        for folder in folders {
            let view = store.open_folder(&user, &folder).unwrap();
            let s = view.status;
            let messages = view
                .messages
                .iter()
                .map(|m| {
                    let content = store.read(&user, &folder, m.uid).unwrap();
                    (m.uid, m.flags, m.keywords.clone(), m.modseq, content)
                })
                .collect();
            out.push((
                (
                    user.clone(),
                    folder,
                    s.uidvalidity,
                    s.uidnext,
                    s.highest_modseq,
                ),
                messages,
            ));
        }
    }
    out
}

fn restore_into(src: &Path, data: &Path) -> (Engines, RestoreSummary) {
    check_empty(data).unwrap();
    let manifest = Manifest::load(src).unwrap().unwrap();
    let e = open(data);
    let summary = restore(src, &manifest, data, &e.queue, &e.store, &mut |_| {}).unwrap();
    (e, summary)
}

#[test]
fn a_backup_restores_uids_flags_modseqs_and_the_queue_and_later_runs_copy_only_new_mail() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let dest = dir.path().join("backup");
    let e = open(&data);
    for n in 1..=5 {
        append(&e.store, "a@x.test", "INBOX", n);
    }
    e.store.create_folder("a@x.test", "Work").unwrap();
    e.store.create_folder("a@x.test", "Work/Old").unwrap();
    append(&e.store, "a@x.test", "Work/Old", 6);
    append(&e.store, "b@x.test", "INBOX", 7);
    e.store
        .set_flags(
            "a@x.test",
            "INBOX",
            &[2, 3],
            FlagOp::Add,
            Flags::SEEN,
            &["$Label1".into()],
        )
        .unwrap();
    e.store.expunge("a@x.test", "INBOX", &[4]).unwrap();
    e.queue.enqueue(envelope("a@x.test"), message(99)).unwrap();
    let config = dir.path().join("mailstow.toml");
    std::fs::write(&config, "[server]\nhostname = \"mx.x.test\"\n").unwrap();

    let first = take_offline(&e, &data, &dest, vec![("config".into(), config.clone())]);
    assert_eq!(first.run, 1);
    assert_eq!(
        (first.folders, first.messages, first.new_messages),
        (4, 6, 6)
    );
    assert_eq!(first.queue_messages, 1);
    let report = verify(&dest, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);

    // Nothing changed: nothing but the manifest is written.
    let again = take_offline(&e, &data, &dest, vec![("config".into(), config.clone())]);
    assert_eq!(
        (again.run, again.new_messages, again.written.objects),
        (2, 0, 0)
    );

    // Two new messages: one pack of two, the changed state; the old packs reused.
    append(&e.store, "a@x.test", "INBOX", 8);
    append(&e.store, "a@x.test", "INBOX", 9);
    let third = take_offline(&e, &data, &dest, vec![("config".into(), config.clone())]);
    assert_eq!(third.new_messages, 2);
    assert_eq!(third.written.objects, 2, "{third}");
    assert!(
        third.written.bytes < first.written.bytes,
        "{third} vs {first}"
    );
    assert!(third.reused.objects >= 4, "{third}");
    assert!(verify(&dest, &mut |_| {}).unwrap().is_clean());

    let before = contents(&e.store);
    let restored_dir = dir.path().join("restored");
    let (r, summary) = restore_into(&dest, &restored_dir);
    assert_eq!(summary.problems, 0, "{summary}");
    assert_eq!(summary.messages, 8);
    assert_eq!(summary.uids_kept, 8);
    assert_eq!(
        contents(&r.store),
        before,
        "the restored store is the backed-up one"
    );
    let queued = r.queue.list().unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].envelope.recipients[0].address, "a@x.test");
    assert!(r.store.fsck(false, &mut |_, _| {}).unwrap().is_clean());
    // The configuration came from outside the data directory: put aside for the operator.
    let (name, path) = &summary.files[0];
    assert_eq!(name, "config");
    assert!(
        path.starts_with(restored_dir.join("restored")),
        "{}",
        path.display()
    );
    assert_eq!(
        std::fs::read(path).unwrap(),
        std::fs::read(&config).unwrap()
    );
    // A restore refuses what is no longer empty.
    let refused = check_empty(&restored_dir).unwrap_err().to_string();
    assert!(
        refused.contains("restore needs an empty data directory"),
        "{refused}"
    );
}

#[test]
fn verify_finds_a_damaged_a_cut_and_a_missing_object() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let dest = dir.path().join("backup");
    let e = open(&data);
    for n in 1..=3 {
        append(&e.store, "a@x.test", "INBOX", n);
    }
    append(&e.store, "b@x.test", "INBOX", 4);
    e.store.create_folder("c@x.test", "INBOX").unwrap();
    take_offline(&e, &data, &dest, Vec::new());
    let manifest = Manifest::load(&dest).unwrap().unwrap();
    let pack = |i: usize| objects::path_of(&dest, &manifest.folders[i].packs[0].object);
    // Flip a byte of a's pack, cut b's, remove c's state.
    let path = pack(0);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let path = pack(1);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
    std::fs::remove_file(objects::path_of(&dest, &manifest.folders[2].state)).unwrap();
    let report = verify(&dest, &mut |_| {}).unwrap();
    assert_eq!(report.problems.len(), 3, "{:?}", report.problems);
    assert!(report.problems[0..].iter().any(|p| p.contains("damaged")));
    assert!(report.problems.iter().any(|p| p.contains("cut short")));
    assert!(report.problems.iter().any(|p| p.contains("missing")));
    // A later run does not build on a damaged earlier pack.
    let no_directory = |_: &Path| -> anyhow::Result<bool> { Ok(false) };
    let sources = Sources {
        data_dir: &data,
        queue: &e.queue,
        store: &e.store,
        running: None,
        directory: &no_directory,
        files: Vec::new(),
        cancel: None,
    };
    let refused = take(&sources, &dest, &mut |_| {}).unwrap_err();
    assert!(
        format!("{refused:#}").contains("missing or damaged"),
        "{refused:#}"
    );
}

#[test]
fn a_cancelled_run_leaves_the_previous_backup_whole() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let dest = dir.path().join("backup");
    let e = open(&data);
    append(&e.store, "a@x.test", "INBOX", 1);
    take_offline(&e, &data, &dest, Vec::new());
    let manifest = std::fs::read(dest.join(MANIFEST)).unwrap();
    append(&e.store, "a@x.test", "INBOX", 2);
    let cancel = std::sync::atomic::AtomicBool::new(true);
    let no_directory = |_: &Path| -> anyhow::Result<bool> { Ok(false) };
    let sources = Sources {
        data_dir: &data,
        queue: &e.queue,
        store: &e.store,
        running: None,
        directory: &no_directory,
        files: Vec::new(),
        cancel: Some(&cancel),
    };
    assert!(take(&sources, &dest, &mut |_| {}).is_err());
    assert_eq!(std::fs::read(dest.join(MANIFEST)).unwrap(), manifest);
    assert!(verify(&dest, &mut |_| {}).unwrap().is_clean());
    // A directory that holds something else is not taken for a backup.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "x").unwrap();
    let refused = take(
        &Sources {
            cancel: None,
            ..sources
        },
        &other,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(refused.to_string().contains("holds no backup"), "{refused}");
}

//! Writes the seed corpora of the fuzz targets to fuzz/corpus/<target>/ (docs/fuzzing.md):
//! client input taken from the protocol crates' transcript tests, messages, and queue and
//! store files written by the real engines on a simulated disk. Run from anywhere:
//!
//!   cargo run --manifest-path fuzz/Cargo.toml -p fuzz-seeds
//!
//! It replaces the seed files it writes (named `seed-*`) and leaves other corpus files alone.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use disk::{Disk, SimDisk};
use mailfs_format::{FLAG_SEGMENTED, Header, Kind, Sealing, seal};
use mime_structure::Structure;
use queue::{Envelope, Outcome, Queue, QueueConfig, Recipient, RecipientStatus};
use store::{FlagOp, Flags, NewMessage, Store, StoreConfig};

/// The separator of client flights in session inputs (fuzz/src/lib.rs `FLIGHT_MARK`).
const FLIGHT_MARK: &[u8] = b"\xff\xfe";

struct Corpus {
    dir: PathBuf,
    count: usize,
}

impl Corpus {
    fn new(root: &Path, target: &str) -> Corpus {
        let dir = root.join(target);
        fs::create_dir_all(&dir).expect("create corpus directory");
        for entry in fs::read_dir(&dir).expect("list corpus").flatten() {
            if entry.file_name().to_string_lossy().starts_with("seed-") {
                fs::remove_file(entry.path()).expect("remove old seed");
            }
        }
        Corpus { dir, count: 0 }
    }

    fn add(&mut self, name: &str, bytes: &[u8]) {
        self.count += 1;
        let name: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(48)
            .collect();
        let path = self.dir.join(format!("seed-{:03}-{name}", self.count));
        fs::write(path, bytes).expect("write seed");
    }
}

/// Rust string escapes of the test sources (`\r`, `\n`, `\t`, `\0`, `\\`, `\"`, `\xHH`).
fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        match chars.next() {
            Some('r') => out.push(b'\r'),
            Some('n') => out.push(b'\n'),
            Some('t') => out.push(b'\t'),
            Some('0') => out.push(0),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                out.push(u8::from_str_radix(&hex, 16).unwrap_or(b'?'));
            }
            Some(other) => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
            }
            None => {}
        }
    }
    out
}

/// Per test function of a transcript file: the client bytes of its `C:` lines (CRLF added)
/// and of its raw lines (`C~` in SMTP, `C|` in POP3).
fn transcripts(file: &Path, raw: &str) -> Vec<(String, Vec<u8>)> {
    let text = fs::read_to_string(file).expect("read test file");
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("fn ") {
            let name = rest.split('(').next().unwrap_or("test").to_string();
            out.push((name, Vec::new()));
            continue;
        }
        let Some((_, bytes)) = out.last_mut() else {
            continue;
        };
        if let Some(text) = line.strip_prefix("C:") {
            bytes.extend(unescape(text.strip_prefix(' ').unwrap_or(text)));
            bytes.extend_from_slice(b"\r\n");
        } else if let Some(text) = line.strip_prefix(raw) {
            bytes.extend(unescape(text.strip_prefix(' ').unwrap_or(text)));
        }
    }
    out.retain(|(_, bytes)| !bytes.is_empty());
    out
}

/// Per test function of the IMAP unit tests: the strings it sends, one flight each.
fn imap_transcripts(file: &Path) -> Vec<(String, Vec<u8>)> {
    let text = fs::read_to_string(file).expect("read test file");
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("fn ") {
            let name = rest.split('(').next().unwrap_or("test").to_string();
            out.push((name, Vec::new()));
            continue;
        }
        let Some((_, bytes)) = out.last_mut() else {
            continue;
        };
        for marker in ["send(\"", "send_bytewise(\"", "send_bytes(b\""] {
            let mut rest = line;
            while let Some(at) = rest.find(marker) {
                let after = &rest[at + marker.len()..];
                // The literal ends at the first unescaped quote.
                let mut end = None;
                let mut escaped = false;
                for (i, c) in after.char_indices() {
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => {
                            end = Some(i);
                            break;
                        }
                        _ => {}
                    }
                }
                let Some(end) = end else { break };
                bytes.extend(unescape(&after[..end]));
                rest = &after[end..];
            }
        }
    }
    out.retain(|(_, bytes)| !bytes.is_empty());
    out
}

fn session_seed(selector: u8, chunk: u8, input: &[u8]) -> Vec<u8> {
    let mut seed = vec![selector, chunk];
    seed.extend_from_slice(input);
    seed
}

fn smtp(root: &Path, repo: &Path) {
    let tests = repo.join("crates/smtp/tests/it");
    let mut smtp = Corpus::new(root, "smtp_session");
    let mut lmtp = Corpus::new(root, "lmtp_session");
    let mut files: Vec<_> = fs::read_dir(&tests)
        .expect("smtp tests")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for file in files {
        let lmtp_file = file.ends_with("lmtp.rs");
        for (name, input) in transcripts(&file, "C~") {
            if lmtp_file {
                lmtp.add(&name, &session_seed(0x00, 7, &input));
                lmtp.add(&name, &session_seed(0x40, 1, &input));
            } else {
                // MX plaintext; submission on TLS with AUTH; small limits.
                smtp.add(&name, &session_seed(0x00, 7, &input));
                smtp.add(&name, &session_seed(0x25, 3, &input));
                smtp.add(&name, &session_seed(0x48, 1, &input));
            }
        }
    }
    // STARTTLS, then a second flight after the handshake.
    let mut tls = b"EHLO c\r\nSTARTTLS\r\nMAIL FROM:<x@y>\r\n".to_vec();
    tls.extend_from_slice(FLIGHT_MARK);
    tls.extend_from_slice(b"EHLO c\r\nAUTH PLAIN AGFsaWNlAHNlY3JldA==\r\nMAIL FROM:<a@b>\r\nRCPT TO:<c@d>\r\nDATA\r\nSubject: x\r\n\r\nhi\r\n.\r\nQUIT\r\n");
    smtp.add("starttls_flights", &session_seed(0x39, 5, &tls));
    println!(
        "smtp_session: {} seeds, lmtp_session: {}",
        smtp.count, lmtp.count
    );
}

fn pop3(root: &Path, repo: &Path) {
    let tests = repo.join("crates/pop3/tests/it");
    let mut corpus = Corpus::new(root, "pop3_session");
    let mut files: Vec<_> = fs::read_dir(&tests)
        .expect("pop3 tests")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    let login = b"USER alice\r\nPASS secret\r\n";
    for file in files {
        for (name, input) in transcripts(&file, "C|") {
            corpus.add(&name, &session_seed(0x04, 5, &input));
            let mut logged_in = login.to_vec();
            logged_in.extend_from_slice(&input);
            corpus.add(&name, &session_seed(0x04, 1, &logged_in));
            corpus.add(&name, &session_seed(0x0c, 9, &logged_in));
        }
    }
    let mut tls = b"CAPA\r\nSTLS\r\nUSER x\r\n".to_vec();
    tls.extend_from_slice(FLIGHT_MARK);
    tls.extend_from_slice(b"CAPA\r\nAUTH PLAIN AGFsaWNlAHNlY3JldA==\r\nSTAT\r\nLIST\r\nUIDL\r\nRETR 2\r\nTOP 4 1\r\nDELE 1\r\nQUIT\r\n");
    corpus.add("stls_flights", &session_seed(0x02, 3, &tls));
    println!("pop3_session: {} seeds", corpus.count);
}

fn imap(root: &Path, repo: &Path) {
    let tests = repo.join("crates/imap/src/tests");
    let mut session = Corpus::new(root, "imap_session");
    let mut framer = Corpus::new(root, "imap_framer");
    let mut files: Vec<_> = fs::read_dir(&tests)
        .expect("imap tests")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.push(repo.join("crates/imap/src/framer/tests.rs"));
    files.sort();
    for file in files {
        for (name, input) in imap_transcripts(&file) {
            session.add(&name, &session_seed(0x00, 63, &input));
            framer.add(&name, &session_seed(0xf0, 7, &input));
            framer.add(&name, &session_seed(0x01, 1, &input));
        }
    }
    // Two sessions of one user: the second sees the first's changes.
    let mut two = b"a SELECT INBOX\r\nb IDLE\r\n".to_vec();
    two.extend_from_slice(FLIGHT_MARK);
    two.extend_from_slice(b"c SELECT INBOX\r\nd STORE 1:2 +FLAGS (\\Deleted)\r\ne EXPUNGE\r\nf APPEND INBOX {5+}\r\nhello\r\n");
    two.extend_from_slice(FLIGHT_MARK);
    two.extend_from_slice(b"DONE\r\ng FETCH 1:* (FLAGS UID BODYSTRUCTURE ENVELOPE BODY.PEEK[1])\r\nh UID SEARCH TEXT hello\r\n");
    session.add("two_sessions", &session_seed(0x01, 17, &two));
    println!(
        "imap_session: {} seeds, imap_framer: {}",
        session.count, framer.count
    );
}

const MESSAGES: [&[u8]; 6] = [
    b"From: Alice <alice@example.org>\r\nTo: bob@example.org, \"Carol, C.\" <carol@example.org>\r\nCc: group: d@example.org, e@example.org;\r\nSubject: =?utf-8?B?w6l0w6k=?= report\r\nDate: Mon, 7 Feb 1994 21:52:25 -0800\r\nMessage-ID: <1@example.org>\r\nIn-Reply-To: <0@example.org>\r\n\r\nbody\r\n",
    b"MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=\"alt\"\r\n\r\npreamble\r\n--alt\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nplain\r\n--alt\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<p>caf=C3=A9</p>\r\n--alt--\r\nepilogue\r\n",
    b"Content-Type: multipart/mixed; boundary=outer\r\n\r\n--outer\r\nContent-Type: message/rfc822\r\n\r\nSubject: inner\r\nContent-Type: multipart/mixed; boundary=inner\r\n\r\n--inner\r\nContent-Type: text/plain\r\n\r\nx\r\n--inner\r\nContent-Type: application/pdf; name=\"a.pdf\"\r\nContent-Disposition: attachment; filename*=utf-8''%C3%A9.pdf\r\nContent-Transfer-Encoding: base64\r\nContent-Language: en, fr\r\nContent-Location: http://x/\r\nContent-MD5: Q2hlY2sgSW50ZWdyaXR5IQ==\r\n\r\nJVBERi0xLg==\r\n--inner--\r\n--outer\r\nContent-Type: message/global\r\n\r\nSubject: g\r\n\r\ng\r\n--outer--\r\n",
    b"Subject: no body",
    b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n--b\r\n\r\n--b--",
    b"From: =?iso-8859-1?q?J=F6rg?= <j@x>\r\nContent-Type: text/plain; charset=\"iso-8859-1\"; format=flowed\r\nContent-Transfer-Encoding: 8bit\r\n\r\n\xe9t\xe9\n",
];

fn mime(root: &Path) {
    let mut corpus = Corpus::new(root, "mime_structure");
    for (i, message) in MESSAGES.iter().enumerate() {
        let mut seed = vec![0u8];
        seed.extend_from_slice(message);
        corpus.add(&format!("message{i}"), &seed);
        let mut stored = vec![1u8];
        stored.extend_from_slice(&Structure::parse(message).to_bytes());
        corpus.add(&format!("structure{i}"), &stored);
    }
    println!("mime_structure: {} seeds", corpus.count);
}

fn read_file(disk: &SimDisk, path: &Path) -> Vec<u8> {
    let file = disk.open(path, false).expect("open");
    let mut bytes = vec![0u8; file.len().expect("len") as usize];
    file.read_exact_at(&mut bytes, 0).expect("read");
    bytes
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) as usize
}

fn queue_seeds(root: &Path) {
    let mut corpus = Corpus::new(root, "queue_record");
    let disk = SimDisk::new();
    let dir = Path::new("/q");
    let config = QueueConfig {
        segment_bytes: 1 << 20,
        ..QueueConfig::default()
    };
    let (queue, _) = Queue::open(Arc::new(disk.clone()), dir, config.clone()).expect("open queue");
    let recipient = |address: &str| Recipient {
        address: address.into(),
        status: RecipientStatus::Pending,
        last_error: None,
    };
    for (i, recipients) in [
        vec!["b@example.org"],
        vec!["c@example.org", "d@example.org", "e@example.org"],
        vec!["f@example.org"],
    ]
    .into_iter()
    .enumerate()
    {
        let envelope = Envelope {
            sender: if i == 2 {
                String::new()
            } else {
                "a@example.org".into()
            },
            recipients: recipients.into_iter().map(recipient).collect(),
            arrival_ms: 1_700_000_000_000 + i as u64,
        };
        queue
            .enqueue(envelope, MESSAGES[i].to_vec())
            .expect("enqueue");
    }
    // One delivered, one deferred (a copy in a deferred segment), one failed (a bounce).
    let batch = queue.next_batch(0, 1, 1 << 20).expect("batch");
    for message in batch {
        let outcomes: Vec<_> = message
            .pending
            .iter()
            .enumerate()
            .map(|(n, &i)| {
                let outcome = if n == 0 {
                    Outcome::Deferred {
                        retry_at_ms: 5,
                        reason: "greylisted".into(),
                    }
                } else {
                    Outcome::Failed {
                        reason: "no such user".into(),
                    }
                };
                (i, outcome)
            })
            .collect();
        queue.finish(message.id, &outcomes).expect("finish");
    }
    queue.close().expect("close queue");
    let mut names = disk.list(dir).expect("list");
    names.sort();
    for name in names.iter().filter(|n| n.ends_with(".seg")) {
        let segment = read_file(&disk, &dir.join(name));
        let header = &segment[..60];
        corpus.add(&format!("header_{name}"), &[&[2u8][..], header].concat());
        let mut slots = Vec::new();
        let mut end = 36_864;
        for i in 0..255 {
            let at = 4096 + i * 64;
            let slot = &segment[at..at + 64];
            if slot.iter().all(|&b| b == 0) {
                break;
            }
            slots.push(slot);
            let (offset, len) = (u32_at(slot, 8), u32_at(slot, 12));
            let n = u16::from_le_bytes([slot[24], slot[25]]) as usize;
            let env_len = u32_at(slot, 16);
            end = end.max(offset + len);
            let record = &segment[offset..offset + len];
            let envelope = &record[20 + n..20 + n + env_len];
            corpus.add(
                &format!("envelope_{name}_{i}"),
                &[&[0u8][..], envelope].concat(),
            );
            corpus.add(
                &format!("record_{name}_{i}"),
                &[&[1u8][..], slot, record].concat(),
            );
            corpus.add(
                &format!("record_fixed_{name}_{i}"),
                &[&[5u8][..], slot, record].concat(),
            );
        }
        let deferred = name.starts_with("deferred");
        for flags in [0x00u8, 0x03, 0x0b] {
            let flags = flags | if deferred { 0x10 } else { 0 };
            let mut seed = vec![3u8, flags];
            seed.extend_from_slice(header);
            seed.push(slots.len() as u8);
            for slot in &slots {
                seed.extend_from_slice(slot);
            }
            seed.extend_from_slice(&segment[36_864..end]);
            corpus.add(&format!("segment_{name}_{flags:02x}"), &seed);
        }
    }
    println!("queue_record: {} seeds", corpus.count);
}

/// fuzz/fuzz_targets/store_journal.rs builds its volume from the same configuration and
/// messages, so the Append records of these journals name real data.
fn store_config() -> StoreConfig {
    StoreConfig {
        volume_grow_bytes: 64 << 10,
        journal_checkpoint_bytes: 16 << 10,
        reservation_bytes: 0,
        ..StoreConfig::default()
    }
}

const TEMPLATE_MESSAGES: [&[u8]; 3] = [
    b"From: a@example.org\r\nSubject: one\r\n\r\nbody one\r\n",
    b"Subject: two\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\n\r\npart\r\n--x--\r\n",
    b"Subject: three\r\n\r\n",
];

/// The payloads of a journal image: records from 4096, `len u32, crc u32, payload`.
fn journal_payloads(image: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 4096;
    while pos + 8 <= image.len() {
        let len = u32_at(image, pos);
        if len == 0 || pos + 8 + len > image.len() {
            break;
        }
        out.push(image[pos + 8..pos + 8 + len].to_vec());
        pos += 8 + len;
    }
    out
}

/// The sections of a snapshot image: magic, then `kind u8, len u32, payload, crc u32`.
fn snapshot_sections(image: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 8;
    while pos + 9 <= image.len() {
        let len = u32_at(image, pos + 1);
        out.push(
            image[pos..pos + 5 + len]
                .iter()
                .enumerate()
                .filter(|(i, _)| !(1..5).contains(i))
                .map(|(_, &b)| b)
                .collect(),
        );
        pos += 9 + len;
    }
    out
}

fn item(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&(payload.len().min(u16::MAX as usize) as u16).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn store_seeds(root: &Path) {
    let mut corpus = Corpus::new(root, "store_journal");
    let disk = SimDisk::new();
    let dir = Path::new("/s");
    let store = Store::open(Arc::new(disk.clone()), dir, store_config())
        .expect("open store")
        .0;
    for (i, content) in TEMPLATE_MESSAGES.iter().enumerate() {
        store
            .append(
                "u",
                "INBOX",
                NewMessage {
                    content: content.to_vec(),
                    internal_date: 1_000_000 + i as i64,
                    ..NewMessage::default()
                },
            )
            .expect("append");
    }
    let first = journal_payloads(&read_file(&disk, &dir.join("index-00000001.log")));
    // More kinds of record: flags with a keyword, expunge, folders.
    store.create_folder("u", "Sent").expect("create");
    store
        .set_flags(
            "u",
            "INBOX",
            &[1, 2],
            FlagOp::Add,
            Flags::SEEN,
            &["$Junk".into()],
        )
        .expect("flags");
    store.expunge("u", "INBOX", &[2]).expect("expunge");
    store.rename_folder("u", "Sent", "Archive").expect("rename");
    store.create_folder("v", "INBOX").expect("create");
    store.delete_folder("u", "Archive").expect("delete");
    let all = journal_payloads(&read_file(&disk, &dir.join("index-00000001.log")));
    store.checkpoint().expect("checkpoint");
    store
        .set_flags("u", "INBOX", &[3], FlagOp::Replace, Flags::FLAGGED, &[])
        .expect("flags");
    store.expunge_below("u", "INBOX", 2).expect("expunge below");
    let snapshot = read_file(&disk, &dir.join("index.snap"));
    let after = journal_payloads(&read_file(&disk, &dir.join("index-00000002.log")));
    drop(store);

    for (i, payload) in all.iter().chain(&after).enumerate() {
        corpus.add(&format!("ops{i}"), &[&[0u8][..], payload].concat());
    }
    for (name, records) in [("template", &first), ("more", &all)] {
        for flags in [0u8, 1] {
            let mut seed = vec![1u8, flags];
            for payload in records.iter() {
                seed.extend(item(0, payload));
            }
            corpus.add(&format!("journal_{name}_{flags}"), &seed);
        }
    }
    let mut seed = vec![1u8, 0];
    for section in snapshot_sections(&snapshot) {
        seed.extend(item(1, &section));
    }
    for payload in &after {
        seed.extend(item(0, payload));
    }
    corpus.add("snapshot_and_journal", &seed);
    println!("store_journal: {} seeds", corpus.count);
}

fn mailfs(root: &Path) {
    let mut corpus = Corpus::new(root, "mailfs_envelope");
    let sealings = [
        Sealing::Aead([7; 32]),
        Sealing::AesGcm([9; 32]),
        Sealing::MacOnly([11; 32]),
    ];
    for (i, sealing) in sealings.iter().enumerate() {
        for (j, flags) in [0u16, FLAG_SEGMENTED].into_iter().enumerate() {
            let header = Header {
                kind: Kind::Block,
                flags,
                fsid: [3; 16],
                object: 42,
                index: 7,
                version: 2,
                raid_index: 1,
            };
            let sealed = seal(sealing, &header, [5; 24], b"block contents").expect("seal");
            corpus.add(&format!("sealed{i}{j}"), &[&[0u8][..], &sealed].concat());
        }
    }
    for (i, (fixed0, repeat)) in [(2u8, 0u8), (2, 0x50), (0x0f, 0x10)]
        .into_iter()
        .enumerate()
    {
        let mut seed = vec![1u8, fixed0, 1];
        seed.extend_from_slice(&[0x11; 38]);
        seed[40] = repeat;
        seed.extend_from_slice(b"payload bytes of a block");
        corpus.add(&format!("round_trip{i}"), &seed);
    }
    println!("mailfs_envelope: {} seeds", corpus.count);
}

fn main() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = repo.join("fuzz/corpus");
    smtp(&root, &repo);
    pop3(&root, &repo);
    imap(&root, &repo);
    mime(&root);
    queue_seeds(&root);
    store_seeds(&root);
    mailfs(&root);
}

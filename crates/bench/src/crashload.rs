//! The load that the SIGKILL crash test runs in a child process (`crashload` binary), and the
//! content rule both sides share so the parent can check every byte it was promised.
//!
//! The child prints one line per acknowledged operation, flushed right after the engine said
//! "durable", never before:
//! `Q <id> <thread> <serial>` enqueued, `F <id>` finished (delivered),
//! `S <user> <uid> <thread> <serial>` appended, `D <user> <uid>` expunged. Before a finish or
//! an expunge it prints `f <id>` / `d <user> <uid>`: from then on the message may be gone.

/// The content of message (`thread`, `serial`) of kind `kind`: 200 B to ~20 KB, distinct.
pub fn content(kind: char, thread: u64, serial: u64) -> Vec<u8> {
    let mut x = (thread << 32) ^ serial ^ ((kind as u64) << 56);
    let mut next = || {
        // xorshift64*: cheap, deterministic, no dependency on the rand version.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let size = 200 + (next() % 20_000) as usize;
    let mut out = format!(
        "From: crash@example.org\r\nTo: t{thread}@example.com\r\nSubject: {kind} {thread} {serial}\r\n\
         Message-ID: <{kind}.{thread}.{serial}@crash>\r\n\r\n"
    )
    .into_bytes();
    while out.len() < size {
        let v = next();
        for shift in (0..64).step_by(8) {
            out.push(b'a' + ((v >> shift) % 26) as u8);
        }
        if out.len() % 70 < 8 {
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

/// The mailbox user that store thread `thread` appends to.
pub fn user(thread: u64) -> String {
    format!("t{thread}@example.com")
}

/// Small segments and a small checkpoint threshold, so a short run crosses segment rollover,
/// recycling and checkpoints.
pub fn queue_config() -> queue::QueueConfig {
    queue::QueueConfig {
        segment_bytes: 2 << 20,
        ..Default::default()
    }
}

pub fn store_config() -> store::StoreConfig {
    store::StoreConfig {
        journal_checkpoint_bytes: 256 << 10,
        volume_grow_bytes: 4 << 20,
        ..Default::default()
    }
}

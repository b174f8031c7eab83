//! Synthetic messages: RFC 5322 headers and printable CRLF body lines, sized exactly.

use rand::{Rng, RngExt};

/// A message of exactly `size` bytes (at least the headers' length) with distinct headers.
pub fn message(rng: &mut impl Rng, serial: u64, to: &str, size: usize) -> Vec<u8> {
    let mut out = format!(
        "From: sender{} <sender{}@example.org>\r\nTo: {to}\r\nSubject: benchmark message {serial}\r\n\
         Date: Sat, 21 Nov 2026 12:00:00 +0000\r\nMessage-ID: <{serial}.{}@bench.mailstow>\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n",
        serial % 97,
        serial % 97,
        rng.random::<u32>()
    )
    .into_bytes();
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789.,";
    while out.len() + 2 < size {
        let line_len = (size - out.len() - 2).min(76);
        for _ in 0..line_len {
            out.push(ALPHABET[rng.random_range(0..ALPHABET.len())]);
        }
        out.extend_from_slice(b"\r\n");
    }
    out.resize(size.max(out.len()), b' ');
    out
}

/// A one-recipient envelope, as an SMTP session would enqueue it.
pub fn envelope(sender: &str, recipient: &str) -> queue::Envelope {
    queue::Envelope {
        sender: sender.into(),
        recipients: vec![queue::Recipient {
            address: recipient.into(),
            status: queue::RecipientStatus::Pending,
            last_error: None,
        }],
        arrival_ms: 0,
    }
}

/// A delivery of `content` to `user`'s INBOX, unflagged.
pub fn to_inbox(user: &str, content: Vec<u8>) -> store::AppendRequest {
    store::AppendRequest {
        user: user.into(),
        folder: "INBOX".into(),
        message: new_message(content),
    }
}

/// An unflagged message with a fixed internal date.
pub fn new_message(content: Vec<u8>) -> store::NewMessage {
    store::NewMessage {
        flags: store::Flags::default(),
        keywords: Vec::new(),
        internal_date: 1_795_000_000,
        content,
    }
}

/// A size drawn like the peer harness's `mkmailbox.py`: uniform in 2,560..=10,240 bytes.
pub fn thesis_size(rng: &mut impl Rng) -> usize {
    rng.random_range(2_560..=10_240)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    #[test]
    fn sizes_are_exact() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for size in [400, 2_560, 8_192, 10_240] {
            let m = super::message(&mut rng, 7, "u@example.com", size);
            assert_eq!(m.len(), size);
            assert!(m.starts_with(b"From: "));
        }
    }
}

//! crates/mailfs-format's envelope (docs/fuzzing.md).
//!
//! Input: a mode byte, then bytes.
//! - mode even: the bytes are a message as fetched from an account. `peek` and every
//!   sealing's `open`, `open_owned` and `open_segments` (with the range and length the next
//!   bytes choose) must not panic, and `open` and `open_owned` must agree.
//! - mode odd: the bytes choose a header, a nonce, a payload (up to 256 KiB, so several
//!   64 KiB segments) and a byte to flip; sealing and opening must give the payload back under
//!   every sealing, segmented or not, a range must open to its slice, and the envelope with
//!   the flipped byte must not open.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailfs_format::{
    FLAG_SEGMENTED, HEADER_BYTES, Header, Kind, NONCE_BYTES, PREFIX_BYTES, Sealing, TAG_BYTES,
    open, open_owned, open_segments, peek, seal, segment_count, segment_span, segments_for,
};

fn sealings() -> [Sealing; 3] {
    [
        Sealing::Aead([7; 32]),
        Sealing::AesGcm([9; 32]),
        Sealing::MacOnly([11; 32]),
    ]
}

fn u64_from(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(b)
}

fn fetched(bytes: &[u8]) {
    let Ok(found) = peek(bytes) else {
        return;
    };
    // The range and payload length an IMAP partial fetch would have used.
    let len = (u64_from(bytes.get(HEADER_BYTES..).unwrap_or_default()) % (300 << 10)) as usize;
    for sealing in sealings() {
        let opened = open(&sealing, &found, bytes);
        let owned = open_owned(&sealing, &found, bytes.to_vec());
        assert_eq!(opened, owned, "open and open_owned disagree");
        if found.flags & FLAG_SEGMENTED != 0 {
            let count = segment_count(len);
            let first = len % count.max(1);
            let segments = first..count;
            if let Some(sealed) = bytes.get(PREFIX_BYTES..) {
                let _ = open_segments(&sealing, &found, bytes, len, segments, sealed);
            }
        }
    }
}

fn round_trip(bytes: &[u8]) {
    if bytes.len() < 40 {
        return;
    }
    let (fixed, rest) = bytes.split_at(40);
    let kind = match fixed[0] % 5 {
        0 => Kind::Superblock,
        1 => Kind::Directory,
        2 => Kind::Block,
        3 => Kind::Chunk,
        _ => Kind::JournalPage,
    };
    let segmented = fixed[1] & 1 != 0;
    let header = Header {
        kind,
        flags: if segmented { FLAG_SEGMENTED } else { 0 },
        fsid: fixed[2..18].try_into().expect("16 bytes"),
        object: u64_from(&fixed[18..26]),
        index: u64_from(&fixed[26..30]),
        version: u64_from(&fixed[30..34]),
        raid_index: fixed[34],
    };
    let mut nonce = [0u8; NONCE_BYTES];
    nonce[..4].copy_from_slice(&fixed[35..39]);
    // Long payloads repeat the input, to cross segment boundaries cheaply.
    let repeat = usize::from(fixed[39] >> 4);
    let mut payload = rest.to_vec();
    if repeat > 0 && !rest.is_empty() {
        let target = repeat * (16 << 10) + rest.len();
        payload = rest.iter().copied().cycle().take(target).collect();
    }
    let flip = u64_from(rest) as usize;
    for sealing in sealings() {
        let sealed = seal(&sealing, &header, nonce, &payload).expect("seal");
        assert_eq!(peek(&sealed), Ok(header), "the clear header reads back");
        assert_eq!(
            open(&sealing, &header, &sealed).as_deref(),
            Ok(&payload[..]),
            "open"
        );
        assert_eq!(
            open_owned(&sealing, &header, sealed.clone()).as_deref(),
            Ok(&payload[..]),
            "open_owned"
        );
        if segmented {
            let len = payload.len();
            let start = flip % (len + 1);
            let end = start + (flip / 7) % (len - start + 1);
            let segments = segments_for(len, start..end);
            let first = segment_span(len, segments.start).start;
            let last = segment_span(len, segments.end - 1).end;
            let plain = open_segments(
                &sealing,
                &header,
                &sealed,
                len,
                segments.clone(),
                &sealed[first..last],
            )
            .expect("a range of a sealed message opens");
            let from = segments.start * mailfs_format::SEGMENT_BYTES;
            assert!(
                from <= start && end <= from + plain.len(),
                "the segments hold the range"
            );
            assert_eq!(
                &plain[..],
                &payload[from..from + plain.len()],
                "open_segments"
            );
        }
        // Any flipped byte breaks it, except the unused nonce field of an unsegmented MAC-only
        // envelope, which nothing reads.
        let at = flip % sealed.len();
        let unused = matches!(sealing, Sealing::MacOnly(_))
            && !segmented
            && (HEADER_BYTES..HEADER_BYTES + NONCE_BYTES).contains(&at);
        if !unused {
            let mut bad = sealed.clone();
            bad[at] ^= 1 << (fixed[39] & 7);
            assert!(
                open(&sealing, &header, &bad).is_err(),
                "a flipped byte at {at} still opens"
            );
            assert!(
                open_owned(&sealing, &header, bad).is_err(),
                "a flipped byte at {at} still opens (owned)"
            );
        }
        assert!(sealed.len() >= PREFIX_BYTES + TAG_BYTES);
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, bytes @ ..] = data else {
        return;
    };
    if mode & 1 == 0 || mailstow_fuzz::decoders_only() {
        fetched(bytes);
    } else {
        round_trip(bytes);
    }
});

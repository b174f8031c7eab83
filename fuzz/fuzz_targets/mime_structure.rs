//! crates/mime-structure on arbitrary messages and arbitrary stored structures
//! (docs/fuzzing.md).
//!
//! Input: a mode byte, then bytes. Mode even: the bytes are a message; its structure must
//! survive `to_bytes`/`from_bytes` unchanged, and every part's ranges must be ordered and lie
//! inside the message. Mode odd: the bytes are a stored structure (a damaged one, as a read
//! from disk may find); `from_bytes` must not panic, and what it accepts must answer every
//! section path without panicking and encode back to an equal structure.
#![no_main]

use std::ops::Range;

use libfuzzer_sys::fuzz_target;
use mime_structure::{Part, Structure, decode_binary, filter_header_fields};

/// Every section path reachable from `prefix`, to a bounded depth and breadth, with its part.
fn walk<'a>(structure: &'a Structure, prefix: &mut Vec<u32>, out: &mut Vec<(Vec<u32>, &'a Part)>) {
    if prefix.len() >= 8 || out.len() >= 400 {
        return;
    }
    for n in 1..=40u32 {
        prefix.push(n);
        match structure.part(prefix) {
            Some(part) => {
                out.push((prefix.clone(), part));
                walk(structure, prefix, out);
                prefix.pop();
            }
            None => {
                prefix.pop();
                // Numbering is dense: 0 and a number past the last part find nothing.
                break;
            }
        }
    }
}

fn check_range(what: &str, range: Range<u64>, len: u64) {
    assert!(
        range.start <= range.end,
        "{what}: range {range:?} runs backwards"
    );
    assert!(
        range.end <= len,
        "{what}: range {range:?} past the message end {len}"
    );
}

fn slice(content: &[u8], range: Range<u64>) -> &[u8] {
    let start = usize::try_from(range.start)
        .unwrap_or(usize::MAX)
        .min(content.len());
    let end = usize::try_from(range.end)
        .unwrap_or(usize::MAX)
        .clamp(start, content.len());
    &content[start..end]
}

fn parts_and_answers(structure: &Structure, content: Option<&[u8]>) {
    assert!(
        structure.part(&[]).is_none(),
        "the empty path names no part"
    );
    assert!(structure.part(&[0]).is_none(), "parts are numbered from 1");
    let mut parts = Vec::new();
    walk(structure, &mut Vec::new(), &mut parts);
    let Some(content) = content else {
        return;
    };
    let len = content.len() as u64;
    check_range("HEADER", structure.header_range(), len);
    check_range("TEXT", structure.text_range(), len);
    assert_eq!(
        structure.header_range().end,
        structure.text_range().start,
        "the body starts where the header ends"
    );
    for (path, part) in parts {
        let what = format!("part {path:?}");
        check_range(&what, part.mime_header_range(), len);
        check_range(&what, part.body_range(), len);
        assert!(
            part.mime_header_range().end <= part.body_range().start,
            "{what}: header after body"
        );
        if let Some(range) = part.message_header_range() {
            check_range(&format!("{what}.HEADER"), range, len);
        }
        if let Some(range) = part.message_text_range() {
            check_range(&format!("{what}.TEXT"), range, len);
        }
        // What FETCH BINARY and HEADER.FIELDS do with the part.
        let _ = decode_binary(part.encoding(), slice(content, part.body_range()));
        let _ = filter_header_fields(
            slice(content, part.mime_header_range()),
            &[b"Content-Type", b"x"],
            false,
        );
        let _ = filter_header_fields(
            slice(content, part.mime_header_range()),
            &[b"content-type"],
            true,
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, bytes @ ..] = data else {
        return;
    };
    if mode & 1 == 0 {
        let structure = Structure::parse(bytes);
        let stored = structure.to_bytes();
        let back = Structure::from_bytes(&stored).expect("a structure just encoded decodes");
        assert_eq!(back, structure, "to_bytes/from_bytes changed the structure");
        assert!(structure.envelope().starts_with(b"("), "ENVELOPE is a list");
        assert!(
            structure.body_structure().starts_with(b"("),
            "BODYSTRUCTURE is a list"
        );
        assert!(structure.body().starts_with(b"("), "BODY is a list");
        parts_and_answers(&structure, Some(bytes));
    } else if let Ok(structure) = Structure::from_bytes(bytes) {
        parts_and_answers(&structure, None);
        let again =
            Structure::from_bytes(&structure.to_bytes()).expect("re-encoded structure decodes");
        assert_eq!(
            again, structure,
            "a decoded structure encodes back to itself"
        );
    }
});

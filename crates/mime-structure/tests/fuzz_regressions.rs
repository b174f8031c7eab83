//! Inputs the fuzz targets found (fuzz/, docs/fuzzing.md).

use mime_structure::Structure;

/// fuzz mime_structure: this message reaches a `debug_assert!(false, "Invalid part ID, could
/// not find multipart.")` in mail-parser 0.11.9 (src/parsers/message.rs:485), which panics in
/// a build with mail-parser's debug assertions on. The workspace keeps them off in every
/// profile (Cargo.toml), so no build of ours panics on it; this checks that what mail-parser
/// then describes is sound. The cure for the assertion itself is upstream.
#[test]
fn multipart_with_message_parts_and_no_line_after_the_boundary() {
    let message: &[u8] = b"Content-Type:multipart;boundary=outer\n\n--outerContent-Type: message/rfc822\n\nContent-Type:message/global\n\n\n--outer--";
    let structure = Structure::parse(message);
    let len = message.len() as u64;
    assert!(structure.header_range().end <= len);
    assert!(structure.text_range().start <= structure.text_range().end);
    assert!(structure.text_range().end <= len);
    let stored = structure.to_bytes();
    assert_eq!(Structure::from_bytes(&stored).unwrap(), structure);
}

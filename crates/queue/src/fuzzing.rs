//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`, off by default): the
//! record and envelope decoders are crate-private, and behind a segment's checksums a
//! fuzzer mutating whole segment files rarely reaches them.

use crate::format;

/// Decodes an envelope and encodes it again; `None` if it does not decode. The encoding is
/// canonical, so bytes that decode must come back unchanged.
pub fn reencode_envelope(bytes: &[u8]) -> Option<Vec<u8>> {
    format::decode_envelope(bytes)
        .ok()
        .map(|envelope| format::encode_envelope(&envelope))
}

/// Checks `record` against the slot in `slot` (64 bytes, decoded without checks) the way a
/// read does, then decodes its envelope; true if both succeed.
pub fn check_record(slot: &[u8; 64], record: &[u8]) -> bool {
    let slot = format::Slot::decode(slot);
    format::check_record(record, &slot)
        .is_ok_and(|view| format::decode_envelope(view.envelope).is_ok())
}

/// Decodes a segment header (at least 60 bytes are read); true if it is valid.
pub fn decode_header(bytes: &[u8]) -> bool {
    format::Header::decode(bytes).is_ok()
}

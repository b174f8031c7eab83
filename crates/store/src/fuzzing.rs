//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`, off by default): the
//! journal's operation decoder is crate-private, and a target that only opens whole stores
//! reaches it behind a CRC chain it has to rebuild first.

/// Decodes one journal record payload and encodes the operations again; `None` if it does
/// not decode. The encoding is canonical, so a payload that decodes must come back unchanged.
pub fn reencode_ops(payload: &[u8]) -> Option<Vec<u8>> {
    let ops = crate::journal::decode_ops(payload).ok()?;
    Some(crate::journal::encode_ops(&ops))
}

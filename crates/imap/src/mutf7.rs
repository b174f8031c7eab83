//! Modified UTF-7 (RFC 3501 5.1.3), the mailbox name encoding of IMAP4rev1 clients that have
//! not enabled UTF8=ACCEPT (RFC 6855 3). The store keeps names in UTF-8; the session converts
//! at the wire for those clients only.
//!
//! Printable US-ASCII other than `&` stands for itself; `&` is `&-`; any other run of
//! characters is `&`, their UTF-16 in base64 with `,` for `/` and no padding, then `-`.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,";

/// The modified UTF-7 form of a UTF-8 name.
pub(crate) fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut run: Vec<u16> = Vec::new();
    let flush = |run: &mut Vec<u16>, out: &mut String| {
        if run.is_empty() {
            return;
        }
        out.push('&');
        let bytes: Vec<u8> = run.iter().flat_map(|u| u.to_be_bytes()).collect();
        for chunk in bytes.chunks(3) {
            let n = chunk.len();
            let v = (u32::from(chunk[0]) << 16)
                | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
                | u32::from(*chunk.get(2).unwrap_or(&0));
            for i in 0..=n {
                out.push(ALPHABET[((v >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out.push('-');
        run.clear();
    };
    for c in name.chars() {
        if (' '..='~').contains(&c) {
            flush(&mut run, &mut out);
            if c == '&' {
                out.push_str("&-");
            } else {
                out.push(c);
            }
        } else {
            let mut units = [0u16; 2];
            run.extend_from_slice(c.encode_utf16(&mut units));
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The UTF-8 name a modified UTF-7 name stands for; `None` if it is not valid modified UTF-7:
/// a byte outside printable US-ASCII, a bad base64 run, printable ASCII or a lone surrogate
/// encoded in one, or non-zero bits left over (RFC 3501 5.1.3 allows one encoding only).
pub(crate) fn decode(wire: &str) -> Option<String> {
    let mut out = String::with_capacity(wire.len());
    let bytes = wire.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !(0x20..=0x7e).contains(&b) {
            return None;
        }
        if b != b'&' {
            out.push(b as char);
            i += 1;
            continue;
        }
        let end = i + 1 + bytes[i + 1..].iter().position(|&c| c == b'-')?;
        let run = &bytes[i + 1..end];
        if run.is_empty() {
            out.push('&');
        } else {
            let mut bits = 0u32;
            let mut nbits = 0;
            let mut units = Vec::new();
            for &c in run {
                let v = ALPHABET.iter().position(|&a| a == c)? as u32;
                bits = (bits << 6) | v;
                nbits += 6;
                if nbits >= 16 {
                    nbits -= 16;
                    units.push((bits >> nbits) as u16);
                    bits &= (1 << nbits) - 1;
                }
            }
            if nbits >= 6 || bits != 0 {
                return None;
            }
            let text = String::from_utf16(&units).ok()?;
            // Printable ASCII must stand for itself, and `&-` follows a run, never `&` in one.
            if text.chars().any(|c| (' '..='~').contains(&c)) {
                return None;
            }
            // Two runs back to back would have been one.
            if out.ends_with(|c: char| !(' '..='~').contains(&c)) && i > 0 && bytes[i - 1] == b'-' {
                return None;
            }
            out.push_str(&text);
        }
        i = end + 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_3501_example_and_round_trips() {
        // RFC 3501 5.1.3's example.
        assert_eq!(
            decode("~peter/mail/&U,BTFw-/&ZeVnLIqe-").as_deref(),
            Some("~peter/mail/台北/日本語")
        );
        for name in [
            "INBOX",
            "Entwürfe",
            "A&B",
            "&",
            "台北/日本語",
            "Ünïcödé & more",
            "emoji 😀 folder",
            "",
        ] {
            assert_eq!(decode(&encode(name)).as_deref(), Some(name), "{name}");
        }
        assert_eq!(encode("Entwürfe"), "Entw&APw-rfe");
        assert_eq!(encode("A&B"), "A&-B");
        assert_eq!(encode("😀"), "&2D3eAA-");
    }

    #[test]
    fn only_the_one_encoding_is_accepted() {
        for bad in [
            "Entwürfe",           // 8-bit
            "&Jjo!",              // no terminating '-'
            "&AGE-",              // printable ASCII ("a") encoded
            "&2D0-",              // a lone surrogate
            "&APw",               // unterminated
            "&APx-",              // non-zero leftover bits
            "&U,BTFw-&ZeVnLIqe-", // two adjacent runs
            "&*-",                // not base64
        ] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}

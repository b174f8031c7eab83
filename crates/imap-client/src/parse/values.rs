//! Values inside responses and commands: dates, modified UTF-7 mailbox names, quoting,
//! header fields.

/// An IMAP date-time (RFC 3501 9): `dd-Mon-yyyy hh:mm:ss +zzzz`, the day maybe
/// space-padded; Unix seconds.
pub(crate) fn internal_date(s: &str) -> Option<i64> {
    let s = s.trim_start();
    let (date, rest) = s.split_once(' ')?;
    let (time, zone) = rest.trim_start().split_once(' ')?;
    let mut d = date.split('-');
    let day: i64 = d.next()?.parse().ok()?;
    let month = d.next()?.to_ascii_lowercase();
    let year: i64 = d.next()?.parse().ok()?;
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let mut t = time.split(':');
    let (h, m, sec): (i64, i64, i64) = (
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
    );
    let zone = zone.trim();
    if zone.len() != 5 || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let sign = match &zone[..1] {
        "+" => 1,
        "-" => -1,
        _ => return None,
    };
    let zh: i64 = zone[1..3].parse().ok()?;
    let zm: i64 = zone[3..5].parse().ok()?;
    // Days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + m * 60 + sec - sign * (zh * 3600 + zm * 60))
}

/// Modified UTF-7 (RFC 3501 5.1.3) to UTF-8; None if it is not valid.
pub(crate) fn utf7_decode(raw: &[u8]) -> Option<String> {
    use base64::Engine as _;
    let mut out = String::new();
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if c != b'&' {
            if !(0x20..0x7f).contains(&c) {
                return None;
            }
            out.push(c as char);
            i += 1;
            continue;
        }
        let end = i + 1 + raw[i + 1..].iter().position(|&b| b == b'-')?;
        if end == i + 1 {
            out.push('&');
        } else {
            let b64: Vec<u8> = raw[i + 1..end]
                .iter()
                .map(|&b| if b == b',' { b'/' } else { b })
                .collect();
            let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(&b64)
                .ok()?;
            if bytes.len() % 2 != 0 {
                return None;
            }
            let units: Vec<u16> = bytes
                .chunks(2)
                .map(|p| u16::from_be_bytes([p[0], p[1]]))
                .collect();
            out.push_str(&String::from_utf16(&units).ok()?);
        }
        i = end + 1;
    }
    Some(out)
}

pub(crate) fn parse_u32(b: &[u8]) -> Option<u32> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// The first 200 bytes of a response for error messages.
pub(crate) fn snippet(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(200)];
    let mut s = String::from_utf8_lossy(cut).escape_debug().to_string();
    if bytes.len() > cut.len() {
        s.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    s
}

/// The unfolded (RFC 5322 2.2.3), trimmed value of header `field` in a header block as
/// returned for `BODY[HEADER.FIELDS (field)]`; empty if absent.
pub(crate) fn header_value(block: &[u8], field: &str) -> String {
    let text = String::from_utf8_lossy(block);
    let mut value: Option<String> = None;
    let mut done = false;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(v) = value.as_mut()
            && !done
        {
            if line.starts_with([' ', '\t']) {
                v.push(' ');
                v.push_str(line.trim());
                continue;
            }
            done = true;
        }
        if value.is_none()
            && let Some((name, rest)) = line.split_once(':')
            && name.trim_end().eq_ignore_ascii_case(field)
        {
            value = Some(rest.trim().to_string());
        }
    }
    value.unwrap_or_default().trim().to_string()
}

/// A mailbox name as an IMAP astring: modified UTF-7 (RFC 3501 5.1.3), then quoted.
pub(crate) fn mailbox(name: &str) -> Vec<u8> {
    quoted(utf7_encode(name).as_bytes())
}

/// Quoted string (RFC 3501 4.3): `"` and `\` escaped. Only for bytes that a quoted
/// string may carry (7-bit, no CR/LF/NUL); see [`can_quote`].
pub(crate) fn quoted(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'"');
    for &b in s {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    out
}

/// Whether `s` fits a quoted string (RFC 3501 9, `QUOTED-CHAR`).
pub(crate) fn can_quote(s: &[u8]) -> bool {
    s.iter()
        .all(|&b| (0x01..=0x7f).contains(&b) && b != b'\r' && b != b'\n')
}

/// Modified UTF-7 for mailbox names (RFC 3501 5.1.3).
pub(crate) fn utf7_encode(name: &str) -> String {
    use base64::Engine;
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::IMAP_MUTF7,
        base64::engine::general_purpose::NO_PAD,
    );
    let mut out = String::new();
    let mut pending: Vec<u16> = Vec::new();
    let flush = |pending: &mut Vec<u16>, out: &mut String| {
        if !pending.is_empty() {
            let bytes: Vec<u8> = pending.iter().flat_map(|u| u.to_be_bytes()).collect();
            out.push('&');
            out.push_str(&engine.encode(bytes));
            out.push('-');
            pending.clear();
        }
    };
    for c in name.chars() {
        if (' '..='~').contains(&c) {
            flush(&mut pending, &mut out);
            if c == '&' {
                out.push_str("&-");
            } else {
                out.push(c);
            }
        } else {
            let mut units = [0u16; 2];
            pending.extend_from_slice(c.encode_utf16(&mut units));
        }
    }
    flush(&mut pending, &mut out);
    out
}

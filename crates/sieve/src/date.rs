//! Dates for the `date` and `currentdate` tests (RFC 5260 4-5): parsing a header's date
//! (RFC 5322 3.3, via mail-parser), zones, and the date-parts.

use mail_parser::DateTime;

/// A moment and the zone it is shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Moment {
    /// Seconds since the Unix epoch (UTC).
    pub(crate) utc: i64,
    /// Offset from UTC in minutes.
    pub(crate) zone: i32,
}

/// Parses an RFC 5322 date-time; None when it is not one.
pub(crate) fn parse_rfc5322(value: &str) -> Option<Moment> {
    let dt = DateTime::parse_rfc822(&format!("{}\r\n", value.trim()))?;
    if !dt.is_valid() {
        return None;
    }
    let offset = i32::from(dt.tz_hour) * 60 + i32::from(dt.tz_minute);
    let zone = if dt.tz_before_gmt { -offset } else { offset };
    let utc = days_from_civil(i64::from(dt.year), u32::from(dt.month), u32::from(dt.day)) * 86400
        + i64::from(dt.hour) * 3600
        + i64::from(dt.minute) * 60
        + i64::from(dt.second)
        - i64::from(zone) * 60;
    Some(Moment { utc, zone })
}

/// The date in a header field (RFC 5260 4): the whole value, or what follows its last
/// semicolon (as in Received).
pub(crate) fn parse_field(value: &str) -> Option<Moment> {
    parse_rfc5322(value).or_else(|| parse_rfc5322(value.rsplit_once(';')?.1))
}

/// Parses a `:zone` argument: "+hhmm" or "-hhmm" (RFC 5260 4.1).
pub(crate) fn parse_zone(z: &str) -> Option<i32> {
    let b = z.as_bytes();
    if b.len() != 5 || !b[1..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let sign = match b[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let h = i32::from(b[1] - b'0') * 10 + i32::from(b[2] - b'0');
    let m = i32::from(b[3] - b'0') * 10 + i32::from(b[4] - b'0');
    if h > 23 || m > 59 {
        return None;
    }
    Some(sign * (h * 60 + m))
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number since 1970-01-01.
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn zone_string(zone: i32, colon: bool) -> String {
    let sign = if zone < 0 { '-' } else { '+' };
    let a = zone.unsigned_abs();
    if colon {
        format!("{sign}{:02}:{:02}", a / 60, a % 60)
    } else {
        format!("{sign}{:02}{:02}", a / 60, a % 60)
    }
}

/// The value of a date-part (RFC 5260 4.2) of `moment` in its zone; None for an unknown
/// part name.
pub(crate) fn date_part(moment: Moment, part: &str) -> Option<String> {
    let local = moment.utc.saturating_add(i64::from(moment.zone) * 60);
    let days = local.div_euclid(86400);
    let secs = local.rem_euclid(86400);
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (secs / 3600, secs / 60 % 60, secs % 60);
    let part = part.to_ascii_lowercase();
    Some(match part.as_str() {
        "year" => format!("{y:04}"),
        "month" => format!("{m:02}"),
        "day" => format!("{d:02}"),
        "date" => format!("{y:04}-{m:02}-{d:02}"),
        // Modified Julian Day: days since 1858-11-17 (40587 days before the epoch).
        "julian" => (days + 40_587).to_string(),
        "hour" => format!("{hh:02}"),
        "minute" => format!("{mm:02}"),
        "second" => format!("{ss:02}"),
        "time" => format!("{hh:02}:{mm:02}:{ss:02}"),
        "iso8601" => format!(
            "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}{}",
            zone_string(moment.zone, true)
        ),
        "std11" => format!(
            "{}, {d:02} {} {y:04} {hh:02}:{mm:02}:{ss:02} {}",
            WEEKDAYS[(days + 4).rem_euclid(7) as usize],
            MONTHS[(m as usize).saturating_sub(1).min(11)],
            zone_string(moment.zone, false)
        ),
        "zone" => zone_string(moment.zone, false),
        "weekday" => (days + 4).rem_euclid(7).to_string(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 5260 4.2
    #[test]
    fn date_parts() {
        let m = parse_rfc5322("Mon, 01 Aug 2005 12:30:15 -0500").unwrap();
        assert_eq!(m.zone, -300);
        assert_eq!(date_part(m, "date").unwrap(), "2005-08-01");
        assert_eq!(date_part(m, "time").unwrap(), "12:30:15");
        assert_eq!(date_part(m, "zone").unwrap(), "-0500");
        assert_eq!(date_part(m, "weekday").unwrap(), "1");
        assert_eq!(
            date_part(m, "iso8601").unwrap(),
            "2005-08-01T12:30:15-05:00"
        );
        assert_eq!(
            date_part(m, "std11").unwrap(),
            "Mon, 01 Aug 2005 12:30:15 -0500"
        );
        let utc = Moment { zone: 0, ..m };
        assert_eq!(date_part(utc, "hour").unwrap(), "17");
        // 1858-11-17 is MJD 0.
        let mjd0 = Moment {
            utc: days_from_civil(1858, 11, 17) * 86400,
            zone: 0,
        };
        assert_eq!(date_part(mjd0, "julian").unwrap(), "0");
        assert!(date_part(m, "fortnight").is_none());
        assert!(parse_rfc5322("not a date").is_none());
    }

    #[test]
    fn civil_round_trip() {
        for d in [-800_000i64, -1, 0, 1, 11_016, 20_000, 2_000_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        assert_eq!(parse_zone("+0130"), Some(90));
        assert_eq!(parse_zone("-0000"), Some(0));
        assert_eq!(parse_zone("0100"), None);
    }
}

//! Helpers for log lines: what a client sent is shown on one line and cut short, so a log
//! line can never be split or flooded by it.

/// Longest client-supplied value shown in a log line.
const SHOWN_CHARS_MAX: usize = 120;

/// `text` on one line: control characters become `?`, long values end in `…`.
pub fn shown(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(SHOWN_CHARS_MAX)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().nth(SHOWN_CHARS_MAX).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_and_short() {
        assert_eq!(shown("a\r\nb"), "a??b");
        assert_eq!(shown(""), "");
        let long = "x".repeat(500);
        assert_eq!(shown(&long).chars().count(), SHOWN_CHARS_MAX + 1);
    }
}

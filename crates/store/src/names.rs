//! User, folder and keyword names: what is valid, and the canonical form of a folder name.
//!
//! Folder names are hierarchical with '/' as separator. `INBOX` is case-insensitive (RFC
//! 3501): any capitalisation of the first part `inbox` is stored as `INBOX`; every other part
//! is case-sensitive. Names must be UTF-8 without control characters, and stay inside the
//! configured length and depth limits, so they always fit the on-disk string fields.

use crate::StoreError;
use crate::config::StoreConfig;

fn invalid(name: &str, reason: impl Into<String>) -> StoreError {
    StoreError::InvalidName {
        name: name.to_string(),
        reason: reason.into(),
    }
}

fn has_control(s: &str) -> bool {
    s.chars().any(|c| c.is_control())
}

/// Checks a user name: 1..=user_name_bytes_max bytes, no control characters, no '/'.
pub(crate) fn validate_user(user: &str, config: &StoreConfig) -> Result<(), StoreError> {
    if user.is_empty() {
        return Err(invalid(user, "empty user name"));
    }
    if user.len() > config.user_name_bytes_max {
        return Err(invalid(
            user,
            format!("longer than {} bytes", config.user_name_bytes_max),
        ));
    }
    if has_control(user) || user.contains('/') {
        return Err(invalid(user, "control characters and '/' are not allowed"));
    }
    Ok(())
}

/// Validates a folder name and returns its canonical form (`INBOX` upper-cased).
pub(crate) fn normalize_folder(name: &str, config: &StoreConfig) -> Result<String, StoreError> {
    if name.is_empty() {
        return Err(invalid(name, "empty folder name"));
    }
    if name.len() > config.folder_name_bytes_max {
        return Err(invalid(
            name,
            format!("longer than {} bytes", config.folder_name_bytes_max),
        ));
    }
    if has_control(name) {
        return Err(invalid(name, "control characters are not allowed"));
    }
    let parts: Vec<&str> = name.split('/').collect();
    if parts.len() > config.folder_depth_max {
        return Err(invalid(
            name,
            format!("deeper than {} levels", config.folder_depth_max),
        ));
    }
    for part in &parts {
        if part.is_empty() {
            return Err(invalid(
                name,
                "empty hierarchy level (leading, trailing or double '/')",
            ));
        }
        if *part == "." || *part == ".." {
            return Err(invalid(name, "'.' and '..' are not folder names"));
        }
        if part.contains(['*', '%']) {
            return Err(invalid(name, "'*' and '%' are IMAP wildcards"));
        }
    }
    if parts[0].eq_ignore_ascii_case("INBOX") {
        let mut canonical = String::from("INBOX");
        canonical.push_str(&name[5..]);
        Ok(canonical)
    } else {
        Ok(name.to_string())
    }
}

/// Checks an IMAP keyword (an atom): 1..=keyword_bytes_max bytes of printable ASCII without
/// atom-specials, and not starting with '\' (those are system flags).
pub(crate) fn validate_keyword(keyword: &str, config: &StoreConfig) -> Result<(), StoreError> {
    if keyword.is_empty() {
        return Err(invalid(keyword, "empty keyword"));
    }
    if keyword.len() > config.keyword_bytes_max {
        return Err(invalid(
            keyword,
            format!("longer than {} bytes", config.keyword_bytes_max),
        ));
    }
    let bad = |c: char| {
        !c.is_ascii_graphic() || matches!(c, '(' | ')' | '{' | '%' | '*' | '"' | '\\' | ']')
    };
    if keyword.chars().any(bad) {
        return Err(invalid(
            keyword,
            "keywords are IMAP atoms: printable ASCII, no specials",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> StoreConfig {
        StoreConfig::default()
    }

    #[test]
    fn inbox_is_case_insensitive_and_other_parts_are_not() {
        let c = cfg();
        assert_eq!(normalize_folder("inbox", &c).unwrap(), "INBOX");
        assert_eq!(normalize_folder("InBoX/Sub", &c).unwrap(), "INBOX/Sub");
        assert_eq!(
            normalize_folder("Archive/inbox", &c).unwrap(),
            "Archive/inbox"
        );
        assert_eq!(normalize_folder("INBOXES", &c).unwrap(), "INBOXES");
    }

    #[test]
    fn bad_folder_names_are_rejected() {
        let c = cfg();
        for bad in ["", "/a", "a/", "a//b", "a/./b", "..", "a\nb", "a*", "x%"] {
            assert!(
                matches!(
                    normalize_folder(bad, &c),
                    Err(StoreError::InvalidName { .. })
                ),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn folder_length_limit() {
        let c = StoreConfig {
            folder_name_bytes_max: 10,
            ..cfg()
        };
        assert!(normalize_folder("abcdefghij", &c).is_ok());
        assert!(normalize_folder("abcdefghijk", &c).is_err());
    }

    #[test]
    fn folder_depth_limit() {
        let c = StoreConfig {
            folder_depth_max: 3,
            ..cfg()
        };
        assert!(normalize_folder("a/b/c", &c).is_ok());
        assert!(normalize_folder("a/b/c/d", &c).is_err());
    }

    #[test]
    fn user_limits() {
        let c = StoreConfig {
            user_name_bytes_max: 5,
            ..cfg()
        };
        assert!(validate_user("alice", &c).is_ok());
        assert!(validate_user("alice2", &c).is_err());
        assert!(validate_user("", &c).is_err());
        assert!(validate_user("a/b", &c).is_err());
        assert!(validate_user("a\tb", &c).is_err());
    }

    #[test]
    fn keyword_limits() {
        let c = StoreConfig {
            keyword_bytes_max: 4,
            ..cfg()
        };
        assert!(validate_keyword("$Jnk", &c).is_ok());
        assert!(validate_keyword("$Junk", &c).is_err());
        assert!(validate_keyword("", &c).is_err());
        assert!(validate_keyword("a b", &c).is_err());
        assert!(validate_keyword("\\Sn", &c).is_err());
        assert!(validate_keyword("(x)", &c).is_err());
    }
}

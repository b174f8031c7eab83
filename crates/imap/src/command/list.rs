//! RFC 9051 6.3.9 LIST with LIST-EXTENDED (RFC 5258), LIST-STATUS (RFC 5819) and
//! SPECIAL-USE (RFC 6154); RFC 3501 6.3.9 LSUB.

use std::collections::BTreeSet;

use crate::backend::Backend;
use crate::parse::ListRequest;
use crate::response::write_mailbox;
use crate::session::Session;

pub(crate) fn run(s: &mut Session, tag: &str, req: ListRequest, b: &Backend<'_>) {
    let Some(user) = s.user.clone() else {
        return;
    };
    let verb = if req.lsub { "LSUB" } else { "LIST" };
    // RFC 9051 6.3.9: an empty pattern asks for the delimiter and the root.
    if req.patterns.len() == 1 && req.patterns[0].is_empty() && !req.lsub {
        s.untagged("LIST (\\Noselect) \"/\" \"\"");
        s.done(tag, "OK LIST completed", b, true);
        return;
    }
    let mut existing: BTreeSet<String> = b.store.list_folders(&user).into_iter().collect();
    // Attributes given at CREATE (RFC 6154 3); if the directory cannot say, the defaults.
    let given = b.special_uses.list(&user).unwrap_or_default();
    existing.insert("INBOX".to_string());
    let subscribed: BTreeSet<String> = if req.lsub || req.select_subscribed || req.return_subscribed
    {
        match b.subscriptions.list(&user) {
            Ok(list) => list.into_iter().collect(),
            Err(e) => {
                let e = crate::session::one_line(&e);
                s.tagged(tag, &format!("NO [UNAVAILABLE] {e}"));
                return;
            }
        }
    } else {
        BTreeSet::new()
    };
    // Every existing name and its superiors (a superior that does not exist is shown as
    // \NonExistent / \Noselect, RFC 5258 3).
    let mut names: BTreeSet<String> = BTreeSet::new();
    for name in existing.iter().chain(subscribed.iter()) {
        let mut end = 0;
        while let Some(i) = name[end..].find('/') {
            names.insert(name[..end + i].to_string());
            end += i + 1;
        }
        names.insert(name.clone());
    }
    let has_children = |name: &str| {
        let prefix = format!("{name}/");
        existing
            .range(prefix.clone()..)
            .next()
            .is_some_and(|n| n.starts_with(&prefix))
    };
    let patterns: Vec<String> = req
        .patterns
        .iter()
        .map(|p| format!("{}{}", req.reference, p))
        .collect();
    // A subscribed descendant of `name` that no pattern lists (a `%` stopped above it).
    let subscribed_below = |name: &str| {
        let prefix = format!("{name}/");
        subscribed
            .range(prefix.clone()..)
            .take_while(|n| n.starts_with(&prefix))
            .any(|n| !patterns.iter().any(|p| matches(p, n)))
    };
    for name in &names {
        if !patterns.iter().any(|p| matches(p, name)) {
            continue;
        }
        let exists = existing.contains(name);
        let is_subscribed = subscribed.contains(name);
        let below = (req.lsub || req.recursive_match) && subscribed_below(name);
        // RFC 3501 6.3.9: LSUB lists the unsubscribed superior of a subscribed name that its
        // `%` stops at, as \Noselect. RFC 5258 3.5: SUBSCRIBED RECURSIVEMATCH lists it with
        // CHILDINFO ("SUBSCRIBED").
        let superior_only = !is_subscribed && below;
        if (req.lsub || req.select_subscribed) && !is_subscribed && !superior_only {
            continue;
        }
        let childinfo = req.select_subscribed && req.recursive_match && below;
        let special = super::special_use::attributes(name, &given);
        if req.select_special_use && special.is_empty() {
            continue;
        }
        if !exists && !req.lsub && !req.select_subscribed && !has_children(name) {
            continue;
        }
        let mut attrs: Vec<&str> = Vec::new();
        if !exists {
            attrs.push(if req.extended || s.enabled.rev2 {
                "\\NonExistent"
            } else {
                "\\Noselect"
            });
        } else if req.lsub && superior_only {
            attrs.push("\\Noselect");
        }
        if !req.lsub {
            attrs.push(if has_children(name) {
                "\\HasChildren"
            } else {
                "\\HasNoChildren"
            });
        }
        if is_subscribed && (req.return_subscribed || req.select_subscribed) {
            attrs.push("\\Subscribed");
        }
        attrs.extend(special);
        let mut line = format!("* {verb} ({}) \"/\" ", attrs.join(" ")).into_bytes();
        let wire = s.name_to_client(name).into_owned();
        write_mailbox(&mut line, &wire);
        if childinfo {
            line.extend_from_slice(b" (\"CHILDINFO\" (\"SUBSCRIBED\"))");
        }
        line.extend_from_slice(b"\r\n");
        s.out.extend_from_slice(&line);
        if let Some(items) = &req.return_status
            && exists
        {
            let items: Vec<&str> = items.iter().map(String::as_str).collect();
            if let Ok(status) = super::status::status_response(
                b.store,
                &user,
                name,
                &wire,
                &items,
                s.config.literal_bytes_max,
            ) {
                s.out.extend_from_slice(&status);
            }
        }
    }
    s.done(tag, &format!("OK {verb} completed"), b, true);
}

/// RFC 9051 6.3.9: `*` matches anything, `%` anything but the delimiter. INBOX matches
/// in any case.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    let pattern = match (pattern.get(..5), pattern.get(5..)) {
        (Some(head), Some(rest)) if head.eq_ignore_ascii_case("INBOX") => format!("INBOX{rest}"),
        _ => pattern.to_string(),
    };
    wildcard(pattern.as_bytes(), name.as_bytes())
}

/// Dynamic programming, so a hostile pattern of many `*` costs pattern × name steps.
fn wildcard(p: &[u8], n: &[u8]) -> bool {
    // reach[j]: the pattern so far matches n[..j].
    let mut reach = vec![false; n.len() + 1];
    reach[0] = true;
    for &c in p {
        let mut next = vec![false; n.len() + 1];
        match c {
            b'*' => {
                let mut any = false;
                for j in 0..=n.len() {
                    any |= reach[j];
                    next[j] = any;
                }
            }
            b'%' => {
                let mut run = false;
                for j in 0..=n.len() {
                    if j > 0 && n[j - 1] == b'/' {
                        run = false;
                    }
                    run |= reach[j];
                    next[j] = run;
                }
            }
            _ => {
                for j in 1..=n.len() {
                    next[j] = reach[j - 1] && n[j - 1] == c;
                }
            }
        }
        reach = next;
    }
    reach[n.len()]
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn wildcards() {
        assert!(matches("*", "a/b/c"));
        assert!(matches("%", "a"));
        assert!(!matches("%", "a/b"));
        assert!(matches("a/%", "a/b"));
        assert!(matches("inbox", "INBOX"));
        assert!(matches("*b*", "a/b/c"));
        assert!(!matches("a", "ab"));
        assert!(matches("%/c", "b/c"));
        assert!(!matches("%/c", "a/b/c"));
        assert!(!matches("inbo\u{e9}", "INBOX"));
        assert!(matches("\u{e9}t\u{e9}", "\u{e9}t\u{e9}"));
        let hostile = "*a".repeat(200);
        assert!(!matches(&hostile, &"a".repeat(100)));
    }
}

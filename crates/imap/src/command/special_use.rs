//! RFC 6154 SPECIAL-USE: the default folders every account gets, and their attributes.

/// Created at first login if missing: name and RFC 6154 2 attribute.
pub(crate) const DEFAULTS: [(&str, &str); 5] = [
    ("Sent", "\\Sent"),
    ("Drafts", "\\Drafts"),
    ("Trash", "\\Trash"),
    ("Junk", "\\Junk"),
    ("Archive", "\\Archive"),
];

/// Attributes a client may give a folder at CREATE (RFC 6154 2): all but `\All` and
/// `\Flagged`, which name virtual folders this server does not keep.
const SETTABLE: [&str; 5] = ["\\Archive", "\\Drafts", "\\Junk", "\\Sent", "\\Trash"];

/// The canonical spelling of an attribute a CREATE may give, matched without case.
pub(crate) fn settable(attr: &str) -> Option<&'static str> {
    SETTABLE
        .iter()
        .copied()
        .find(|a| a.eq_ignore_ascii_case(attr))
}

/// The special-use attributes of a folder: those a client gave it at CREATE (`given`, from
/// [`crate::SpecialUses::list`]), else its default by name.
pub(crate) fn attributes<'a>(name: &str, given: &'a [(String, String)]) -> Vec<&'a str> {
    let mut found: Vec<&str> = given
        .iter()
        .filter(|(folder, _)| folder == name)
        .map(|(_, a)| a.as_str())
        .collect();
    if found.is_empty()
        && let Some((_, a)) = DEFAULTS.iter().find(|(n, _)| *n == name)
    {
        found.push(a);
    }
    found
}

/// Makes sure INBOX and the special-use folders exist. Failures are left for the commands
/// that use the folders to report.
pub(crate) fn ensure_defaults(store: &dyn mail_model::Mailstore, user: &str) {
    let existing = store.list_folders(user);
    for name in std::iter::once("INBOX").chain(DEFAULTS.iter().map(|(n, _)| *n)) {
        if !existing.iter().any(|e| e == name) {
            let _ = store.create_folder(user, name);
        }
    }
}

/// Renames folders an IMAP4rev1 client created before names were kept in UTF-8 (their
/// modified UTF-7 was stored as sent): each part of a name that is valid modified UTF-7 and
/// stands for something else becomes that something, unless a folder of the new name exists.
/// (A UTF-8 client's folder literally named like modified UTF-7, `&AOk-`, is renamed too:
/// the price of keeping old folders readable.)
/// Shallowest first, since a rename takes the children along; bounded by the folder count.
pub(crate) fn utf8_names(store: &dyn mail_model::Mailstore, user: &str) {
    let mut folders = store.list_folders(user);
    for _ in 0..=folders.len() {
        folders.sort_by_key(|n| n.matches('/').count());
        let renamed = folders.iter().find_map(|name| {
            if !name.contains('&') {
                return None;
            }
            let decoded = name
                .split('/')
                .map(|part| {
                    mail_model::mutf7::decode_strict(part).unwrap_or_else(|| part.to_string())
                })
                .collect::<Vec<_>>()
                .join("/");
            (decoded != *name && !folders.contains(&decoded))
                .then(|| store.rename_folder(user, name, &decoded).ok())
                .flatten()
        });
        if renamed.is_none() {
            return;
        }
        folders = store.list_folders(user);
    }
}

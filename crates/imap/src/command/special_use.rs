//! RFC 6154 SPECIAL-USE: the default folders every account gets, and their attributes.

/// Created at first login if missing: name and RFC 6154 2 attribute.
pub(crate) const DEFAULTS: [(&str, &str); 5] = [
    ("Sent", "\\Sent"),
    ("Drafts", "\\Drafts"),
    ("Trash", "\\Trash"),
    ("Junk", "\\Junk"),
    ("Archive", "\\Archive"),
];

/// The special-use attribute of a folder name, if it has one.
pub(crate) fn attribute(name: &str) -> Option<&'static str> {
    DEFAULTS.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)
}

/// Makes sure INBOX and the special-use folders exist. Failures are left for the commands
/// that use the folders to report.
pub(crate) fn ensure_defaults(store: &dyn crate::Mailstore, user: &str) {
    let existing = store.list_folders(user);
    for name in std::iter::once("INBOX").chain(DEFAULTS.iter().map(|(n, _)| *n)) {
        if !existing.iter().any(|e| e == name) {
            let _ = store.create_folder(user, name);
        }
    }
}

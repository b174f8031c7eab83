//! RFC 2971 ID.

use imap_codec::imap_types::core::{IString, NString};

use crate::backend::Backend;
use crate::session::Session;

/// RFC 2971 3.3: at most 30 field-value pairs, fields at most 30 octets, values at most
/// 1024. The line cap before login (`prelogin_line_bytes_max`) is sized to let the largest
/// such ID through, so the rules are checked here and a breach is answered BAD, not dropped.
const ID_FIELDS_MAX: usize = 30;
const ID_FIELD_BYTES_MAX: usize = 30;
const ID_VALUE_BYTES_MAX: usize = 1024;

/// The client's parameters as imap-codec gives them (`None` for NIL).
pub(crate) type Parameters = Option<Vec<(IString<'static>, NString<'static>)>>;

/// `b`: the store, in a selected folder, for the updates the answer carries.
pub(crate) fn run(s: &mut Session, tag: &str, parameters: &Parameters, b: Option<&Backend<'_>>) {
    if let Some(why) = parameters.as_deref().and_then(breach) {
        s.tagged(tag, &format!("BAD {why}"));
        s.error();
        return;
    }
    s.untagged(&format!(
        "ID (\"name\" \"mailstow\" \"version\" \"{}\")",
        env!("CARGO_PKG_VERSION")
    ));
    if let Some(b) = b {
        s.sync(b, true);
    }
    s.tagged(tag, "OK ID completed");
}

/// Which RFC 2971 3.3 limit the parameters break, if any.
fn breach(parameters: &[(IString<'_>, NString<'_>)]) -> Option<&'static str> {
    if parameters.len() > ID_FIELDS_MAX {
        return Some("ID: more than 30 field-value pairs (RFC 2971 3.3)");
    }
    for (field, value) in parameters {
        if field.as_ref().len() > ID_FIELD_BYTES_MAX {
            return Some("ID: a field longer than 30 octets (RFC 2971 3.3)");
        }
        if value
            .0
            .as_ref()
            .is_some_and(|v| v.as_ref().len() > ID_VALUE_BYTES_MAX)
        {
            return Some("ID: a value longer than 1024 octets (RFC 2971 3.3)");
        }
    }
    None
}

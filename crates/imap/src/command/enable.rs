//! RFC 5161 ENABLE (RFC 9051 6.3.1).

use imap_codec::imap_types::extensions::enable::CapabilityEnable;

use crate::session::Session;

pub(crate) fn run(s: &mut Session, tag: &str, capabilities: &[CapabilityEnable<'_>]) {
    let mut enabled = Vec::new();
    for cap in capabilities {
        match cap {
            CapabilityEnable::CondStore => {
                s.enabled.condstore = true;
                enabled.push("CONDSTORE".to_string());
            }
            other => {
                if other.to_string().eq_ignore_ascii_case("IMAP4rev2") {
                    s.enabled.rev2 = true;
                    enabled.push("IMAP4rev2".to_string());
                }
            }
        }
    }
    if !enabled.is_empty() {
        s.untagged(&format!("ENABLED {}", enabled.join(" ")));
    }
    s.tagged(tag, "OK ENABLE completed");
}

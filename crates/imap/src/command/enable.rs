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
                let name = other.to_string();
                if name.eq_ignore_ascii_case("IMAP4rev2") {
                    s.enabled.rev2 = true;
                    enabled.push("IMAP4rev2".to_string());
                } else if name.eq_ignore_ascii_case("UTF8=ACCEPT") {
                    // RFC 6855 3: names in UTF-8 from now on, both ways.
                    s.enabled.utf8 = true;
                    enabled.push("UTF8=ACCEPT".to_string());
                } else if name.eq_ignore_ascii_case("QRESYNC") {
                    // RFC 7162 3.2.3: QRESYNC implies CONDSTORE.
                    s.enabled.qresync = true;
                    s.enabled.condstore = true;
                    enabled.push("QRESYNC".to_string());
                }
            }
        }
    }
    if !enabled.is_empty() {
        s.untagged(&format!("ENABLED {}", enabled.join(" ")));
    }
    s.tagged(tag, "OK ENABLE completed");
}

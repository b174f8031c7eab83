//! mailstow's cluster routing parameters on LMTP (not a standard extension; advertised as
//! `XMAILSTOW-ROUTE` only with `Config::cluster_routes`): `MAIL FROM:<a> XORIGIN=node:id`
//! and `RCPT TO:<b> XEPOCH=n`. RFC 5321 4.1.2 lets a server define `X...` parameters
//! (esmtp-keyword); smtp-proto refuses keywords it does not know, so the session takes
//! these off the line before the line is parsed and keeps them for the command's answer.

use crate::config::Mode;
use crate::reply::Reply;
use crate::session::{RouteParams, Session};

/// The LHLO keyword.
pub(crate) const KEYWORD: &str = "XMAILSTOW-ROUTE";
/// Longest node name in `XORIGIN`.
const NODE_BYTES_MAX: usize = 64;
/// Longest id in `XORIGIN`.
const ID_BYTES_MAX: usize = 40;

/// `node:id`, node of `[A-Za-z0-9._-]` (1 to 64 bytes), id of `[A-Za-z0-9.-]` (1 to 40
/// bytes; mailstow sends `<queue id>.<arrival ms>`, unique even if a node's queue restarts
/// from scratch).
fn valid_origin(value: &str) -> bool {
    let Some((node, id)) = value.rsplit_once(':') else {
        return false;
    };
    let name = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    !node.is_empty()
        && node.len() <= NODE_BYTES_MAX
        && node.bytes().all(name)
        && !id.is_empty()
        && id.len() <= ID_BYTES_MAX
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
}

impl Session {
    /// For a MAIL or RCPT line of a cluster peer: the line without our parameter (`None` if
    /// it had none, or this is not such a session) and the value kept in `self.route`.
    pub(crate) fn take_route_params(
        &mut self,
        text: &str,
    ) -> Result<Option<(Vec<u8>, String)>, Reply> {
        self.route = RouteParams::default();
        if self.config.mode != Mode::Lmtp || !self.config.cluster_routes {
            return Ok(None);
        }
        let verb = text.get(..4).map(str::to_ascii_uppercase);
        let name = match verb.as_deref() {
            Some("MAIL") => "XORIGIN=",
            Some("RCPT") => "XEPOCH=",
            _ => return Ok(None),
        };
        // Parameters follow the path's closing '>' (RFC 5321 4.1.2), space separated.
        let Some(path_end) = text.rfind('>') else {
            return Ok(None);
        };
        let (head, params) = text.split_at(path_end + 1);
        let mut kept = Vec::new();
        let mut value = None;
        for param in params.split(' ').filter(|p| !p.is_empty()) {
            match param.get(..name.len()) {
                Some(prefix) if prefix.eq_ignore_ascii_case(name) => {
                    if value.is_some() {
                        return Err(Reply::new(501, (5, 5, 4), format!("Duplicate {name}")));
                    }
                    value = Some(param[name.len()..].to_string());
                }
                _ => kept.push(param),
            }
        }
        let Some(value) = value else {
            return Ok(None);
        };
        if name == "XORIGIN=" {
            if !valid_origin(&value) {
                return Err(Reply::new(501, (5, 5, 4), "Invalid value for XORIGIN"));
            }
            self.route.origin = Some(value);
        } else {
            let epoch = value
                .parse::<u64>()
                .map_err(|_| Reply::new(501, (5, 5, 4), "Invalid value for XEPOCH"))?;
            self.route.epoch = Some(epoch);
        }
        let mut rest = head.to_string();
        for param in kept {
            rest.push(' ');
            rest.push_str(param);
        }
        let line = format!("{rest}\r\n").into_bytes();
        Ok(Some((line, rest)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_a_node_name_and_a_number() {
        assert!(valid_origin("n1:42"));
        assert!(valid_origin("node-2.example_x:0"));
        assert!(!valid_origin("n1"));
        assert!(!valid_origin(":42"));
        assert!(!valid_origin("n 1:42"));
        assert!(valid_origin("n1:42.1764000000000"));
        assert!(!valid_origin("n1:"));
        assert!(!valid_origin("n1:4_2"));
        assert!(!valid_origin(&format!("n1:{}", "1".repeat(41))));
        assert!(!valid_origin(&format!("{}:1", "n".repeat(65))));
    }
}

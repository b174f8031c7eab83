//! Pre-authentication: a node that checked a client's password hands the session to the
//! user's owner without the password.
//!
//! **Pre-authentication.** A node that accepted a client's login (the password checked
//! against its directory cache, throttled like any login) opens a connection to the owner's
//! IMAP or POP3 port, upgrades it with STARTTLS, and logs in with `AUTHENTICATE PLAIN` (IMAP)
//! or `AUTH PLAIN` (POP3) as authorization identity the user, authentication identity
//! `cluster:<our node>`, and as password a token: `v1.<unix seconds>.<client address>.<mac>`,
//! the MAC a keyed BLAKE3 of those fields, the user, the protocol and the TLS exporter value
//! of that very connection (RFC 5705 / RFC 9266's `tls-exporter`), under a key derived from
//! the cluster secret. The owner checks the MAC against its own side of the same TLS
//! connection and the time (±[`TOKEN_SKEW_MAX`]). So the user's password never travels
//! again, a token is useless on any other connection (a relay in the middle has two TLS
//! sessions with two exporter values), and nothing but a holder of the secret can make one.
//! The owner's certificate is not verified (the nodes' certificates are often self-signed):
//! an active attacker on the nodes' network could pose as an owner towards a proxying node,
//! not as a proxying node towards an owner.
//!

use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;

use crate::node::Cluster;

/// The `authcid` prefix of a node's pre-authentication.
const AUTHCID_PREFIX: &str = "cluster:";
/// The `authcid` prefix of a move's pre-authentication (`moves.rs`): admitted only once the
/// owner froze the user; its token is MACed for the protocol `<proto>-move`.
pub const MOVE_AUTHCID_PREFIX: &str = "cluster-move:";
/// How far a token's time may be from ours.
pub const TOKEN_SKEW_MAX: u64 = 120;
/// The TLS exporter label (RFC 5705 4: labels beginning with "EXPERIMENTAL").
pub(crate) const EXPORTER_LABEL: &[u8] = b"EXPERIMENTAL-mailstow-cluster-preauth";

impl Cluster {
    pub fn mac(
        &self,
        proto: &str,
        user: &str,
        from_node: &str,
        ip: &str,
        at: u64,
        binding: &[u8],
    ) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.key);
        for field in [
            proto.as_bytes(),
            user.as_bytes(),
            from_node.as_bytes(),
            ip.as_bytes(),
        ] {
            hasher.update(&(field.len() as u64).to_le_bytes());
            hasher.update(field);
        }
        hasher.update(&at.to_le_bytes());
        hasher.update(binding);
        hasher.finalize()
    }

    /// The SASL PLAIN response that logs `user` in on an owner over the TLS connection whose
    /// exporter value is `binding`.
    pub(crate) fn plain_response(
        &self,
        proto: &str,
        user: &str,
        client: IpAddr,
        binding: &[u8],
    ) -> String {
        let (authzid, authcid, token) = self.plain_fields(false, proto, user, client, binding);
        let plain = format!("{authzid}\0{authcid}\0{token}");
        base64::engine::general_purpose::STANDARD.encode(plain)
    }

    /// (authzid, authcid, token) of a pre-authentication, or with `moving` of a move's.
    pub(crate) fn plain_fields(
        &self,
        moving: bool,
        proto: &str,
        user: &str,
        client: IpAddr,
        binding: &[u8],
    ) -> (String, String, String) {
        let at = unix_now();
        let ip = client.to_string();
        let (proto, prefix) = if moving {
            (format!("{proto}-move"), MOVE_AUTHCID_PREFIX)
        } else {
            (proto.to_string(), AUTHCID_PREFIX)
        };
        let mac = self.mac(&proto, user, &self.node, &ip, at, binding);
        (
            user.to_string(),
            format!("{prefix}{}", self.node),
            format!("v1.{at}.{ip}.{}", mac.to_hex()),
        )
    }

    /// Checks a node's pre-authentication (an AUTH event whose `username` is
    /// `cluster:<node>`): `Some(Ok((user, client address)))` if it is valid on this
    /// connection, `Some(Err(why))` if it is a pre-authentication but not a valid one, `None`
    /// if it is an ordinary login.
    pub fn check_preauth(
        &self,
        proto: &str,
        authzid: &str,
        username: &str,
        password: &str,
        binding: Option<[u8; 32]>,
    ) -> Option<Result<(String, IpAddr), &'static str>> {
        let (from_node, proto) = match username.strip_prefix(MOVE_AUTHCID_PREFIX) {
            Some(node) => (node, format!("{proto}-move")),
            None => (username.strip_prefix(AUTHCID_PREFIX)?, proto.to_string()),
        };
        let proto = proto.as_str();
        Some((|| {
            let binding = binding.ok_or("pre-authentication needs TLS")?;
            let mut parts = password.splitn(4, '.');
            let (Some("v1"), Some(at), Some(_), Some(_)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err("malformed token");
            };
            // The address may itself contain dots: the MAC is the last field.
            let rest = &password[3 + at.len() + 1..];
            let (ip, mac) = rest.rsplit_once('.').ok_or("malformed token")?;
            let at: u64 = at.parse().map_err(|_| "malformed token")?;
            if unix_now().abs_diff(at) > TOKEN_SKEW_MAX {
                return Err("token too old or from the future");
            }
            let client: IpAddr = ip.parse().map_err(|_| "malformed token")?;
            let mac = blake3::Hash::from_hex(mac).map_err(|_| "malformed token")?;
            let user = authzid.to_ascii_lowercase();
            // blake3::Hash compares in constant time.
            if mac != self.mac(proto, &user, from_node, ip, at, &binding) {
                return Err("bad token");
            }
            Ok((user, client))
        })())
    }
}

/// The TLS exporter value both ends of a pre-authentication compute: the owner's side.
pub fn server_exporter(connection: &rustls::ServerConnection) -> Option<[u8; 32]> {
    connection
        .export_keying_material([0u8; 32], EXPORTER_LABEL, None)
        .ok()
}

/// The proxying node's side.
pub(crate) fn client_exporter(connection: &rustls::ClientConnection) -> Option<[u8; 32]> {
    connection
        .export_keying_material([0u8; 32], EXPORTER_LABEL, None)
        .ok()
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn cluster(node: &str, secret: &[u8]) -> Cluster {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        Cluster::new(
            &crate::node::ClusterConfig {
                node: node.into(),
                secret: secret.to_vec(),
            },
            std::sync::Arc::new(config),
        )
    }

    fn parts(response: &str) -> (String, String, String) {
        let plain = base64::engine::general_purpose::STANDARD
            .decode(response)
            .unwrap();
        let plain = String::from_utf8(plain).unwrap();
        let mut fields = plain.split('\0').map(str::to_string);
        (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
        )
    }

    #[test]
    fn a_token_opens_only_its_own_connection_user_and_protocol() {
        let front = cluster("n1", b"shared secret");
        let owner = cluster("n2", b"shared secret");
        let ip: IpAddr = "2001:db8::7".parse().unwrap();
        let binding = [7u8; 32];
        let (authzid, authcid, token) =
            parts(&front.plain_response("imap", "a@example.org", ip, &binding));
        assert_eq!(authcid, "cluster:n1");
        let check = |proto, authzid: &str, binding| {
            owner.check_preauth(proto, authzid, &authcid, &token, binding)
        };
        assert_eq!(
            check("imap", &authzid, Some(binding)),
            Some(Ok(("a@example.org".to_string(), ip)))
        );
        assert_eq!(
            check("imap", &authzid, Some([8u8; 32])),
            Some(Err("bad token"))
        );
        assert_eq!(
            check("pop3", &authzid, Some(binding)),
            Some(Err("bad token"))
        );
        assert_eq!(
            check("imap", "b@example.org", Some(binding)),
            Some(Err("bad token"))
        );
        assert_eq!(
            check("imap", &authzid, None),
            Some(Err("pre-authentication needs TLS"))
        );
        // Another secret.
        let stranger = cluster("n2", b"another secret");
        assert_eq!(
            stranger.check_preauth("imap", &authzid, &authcid, &token, Some(binding)),
            Some(Err("bad token"))
        );
        // An ordinary login is not a pre-authentication.
        assert_eq!(
            owner.check_preauth("imap", "", "a@example.org", "pw", None),
            None
        );
        // Garbage.
        for bad in [
            "",
            "v1",
            "v1.x.1.2.3.4.ab",
            "v2.1.1.1.1.1.ab",
            "v1.1.1.1.1.1",
        ] {
            assert!(matches!(
                owner.check_preauth("imap", "a@example.org", "cluster:n1", bad, Some(binding)),
                Some(Err(_))
            ));
        }
    }

    #[test]
    fn a_move_token_is_only_a_move_token() {
        let target = cluster("n2", b"shared secret");
        let owner = cluster("n1", b"shared secret");
        let ip: IpAddr = "0.0.0.0".parse().unwrap();
        let binding = [3u8; 32];
        let (authzid, authcid, token) = target.plain_fields(true, "imap", "u@x", ip, &binding);
        assert_eq!(authcid, "cluster-move:n2");
        assert_eq!(
            owner.check_preauth("imap", &authzid, &authcid, &token, Some(binding)),
            Some(Ok(("u@x".to_string(), ip)))
        );
        // The same token under the proxy's authcid, or a proxy's token under the move's.
        assert_eq!(
            owner.check_preauth("imap", &authzid, "cluster:n2", &token, Some(binding)),
            Some(Err("bad token"))
        );
        let (_, _, proxy) = target.plain_fields(false, "imap", "u@x", ip, &binding);
        assert_eq!(
            owner.check_preauth("imap", &authzid, &authcid, &proxy, Some(binding)),
            Some(Err("bad token"))
        );
    }
}

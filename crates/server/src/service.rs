//! The services a listener speaks (SMTP, submission, LMTP, POP3, IMAP, ManageSieve, with or
//! without implicit TLS), and what each tells a client it refuses at connect.

use crate::connections::Refused;

/// Which protocol a listener speaks, and whether TLS starts at connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    Smtp,
    Submission,
    /// Submission over implicit TLS (RFC 8314 3.3).
    Submissions,
    Lmtp,
    Pop3,
    Pop3s,
    Imap,
    /// IMAP over implicit TLS (RFC 8314 3.3).
    Imaps,
    /// ManageSieve (RFC 5804) with STARTTLS.
    ManageSieve,
    /// ManageSieve over implicit TLS (no RFC names it; the same session after the handshake).
    ManageSieves,
}

impl Service {
    pub fn name(self) -> &'static str {
        match self {
            Service::Smtp => "smtp",
            Service::Submission => "submission",
            Service::Submissions => "submissions",
            Service::Lmtp => "lmtp",
            Service::Pop3 => "pop3",
            Service::Pop3s => "pop3s",
            Service::Imap => "imap",
            Service::Imaps => "imaps",
            Service::ManageSieve => "managesieve",
            Service::ManageSieves => "managesieves",
        }
    }

    /// What a refused connection is told before it is closed: SMTP's 421 (RFC 5321 3.1),
    /// POP3's `-ERR [SYS/TEMP]` (RFC 3206), IMAP's `BYE`, or ManageSieve's `BYE (TRYLATER)`
    /// (RFC 5804 1.3, 1.7: BYE instead of the greeting).
    pub(crate) fn refusal(self, refused: Refused, hostname: &str) -> String {
        let why = match refused {
            Refused::Total => "too many connections",
            Refused::PerIp => "too many connections from your address",
        };
        match self {
            Service::Pop3 | Service::Pop3s => format!("-ERR [SYS/TEMP] {why}, try again later\r\n"),
            // RFC 9051 7.1.5: BYE as the greeting refuses the connection.
            Service::Imap | Service::Imaps => {
                format!("* BYE [UNAVAILABLE] {why}, try again later\r\n")
            }
            Service::ManageSieve | Service::ManageSieves => {
                format!("BYE (TRYLATER) \"{why}, try again later\"\r\n")
            }
            _ => format!("421 4.7.0 {hostname} {why}, try again later\r\n"),
        }
    }

    /// What a client blocked for failed logins is told at connect (in plaintext, even on an
    /// implicit-TLS port: nothing more is spent on it).
    pub(crate) fn blocked(self, hostname: &str) -> String {
        let why = "too many failed logins from your address, try again later";
        match self {
            Service::Pop3 | Service::Pop3s => format!("-ERR [SYS/TEMP] {why}\r\n"),
            Service::Imap | Service::Imaps => format!("* BYE [UNAVAILABLE] {why}\r\n"),
            Service::ManageSieve | Service::ManageSieves => {
                format!("BYE (TRYLATER) \"{why}\"\r\n")
            }
            _ => format!("421 4.7.0 {hostname} {why}\r\n"),
        }
    }

    /// The services where clients log in (and can guess passwords).
    pub(crate) fn takes_logins(self) -> bool {
        !matches!(self, Service::Smtp | Service::Lmtp)
    }

    pub(crate) fn implicit_tls(self) -> bool {
        matches!(
            self,
            Service::Submissions | Service::Pop3s | Service::Imaps | Service::ManageSieves
        )
    }
}

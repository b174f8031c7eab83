//! The admin socket's requests: one line each, parsed and printed back the same way on both
//! sides (the CLI sends them, the running server parses them).

use std::path::PathBuf;

use queue::MessageId;

use crate::format::one_line;
use crate::migrate::Format;

/// Longest request line accepted (the longest real one is `user rename` and two 254-byte
/// addresses).
pub const REQUEST_BYTES_MAX: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    List,
    Show(MessageId),
    Retry(MessageId),
    Remove(MessageId),
    /// Delete a user and its mail, closing its sessions (`mailstow user del`).
    DeleteUser(String),
    /// Rename a user keeping its mail, closing its sessions (`mailstow user rename`).
    RenameUser(String, String),
    /// Users (of one domain, or all) with their usage (`mailstow user list`).
    UserList(Option<String>),
    /// A user's limits, usage and folders (`mailstow user show`).
    UserShow(String),
    /// Failed-login blocks in force (`mailstow auth blocked`).
    AuthBlocked,
    /// Clear the failed-login counters of an address or a user (`mailstow auth unblock`).
    AuthUnblock(String),
    /// The queue's counters (`mailstow queue stats`).
    QueueStats,
    /// Per-folder counters and the volume's space (`mailstow store stats`).
    StoreStats,
    /// Check the store without repairing (`mailstow store fsck`).
    StoreCheck,
    /// The directory was changed by the CLI: reload its cache now (`mailstow user|alias|
    /// domain …` send it after every change).
    DirectoryChanged,
    /// Import a maildir or mbox at an absolute path into a user's folders (`mailstow mailbox
    /// import`); the answer streams (see [`request_streaming`]).
    Import {
        user: String,
        path: PathBuf,
        /// INBOX's messages go through the user's Sieve rules (`--rules`).
        rules: bool,
    },
    /// Export a user's folders to an absolute path (`mailstow mailbox export`); streams.
    Export {
        user: String,
        path: PathBuf,
        format: Format,
    },
    /// Train a user's classifier (or the site-wide one) on a folder of that user
    /// (`mailstow spam train USER --spam|--ham MAILBOX [--site]`).
    SpamTrain {
        user: String,
        spam: bool,
        mailbox: String,
        site: bool,
    },
    /// A user's classifier and reputation (`mailstow spam stats USER`; `@site` for the
    /// site-wide model).
    SpamStats(String),
    /// End an account's outbound limit on this node (`mailstow spam release USER`).
    SpamRelease(String),
    /// Order the certificate by ACME now and put it in force (`mailstow acme renew`).
    AcmeRenew,
    /// Send the TLS-RPT and DMARC reports due now, or at a given Unix time (`mailstow report
    /// send [--now UNIX]`; the time is for tests and catching up).
    ReportSend(Option<i64>),
    /// Take a backup into an absolute path, copying these files whole (`mailstow backup`;
    /// the CLI names the configuration file and the TLS files); streams.
    Backup {
        dest: PathBuf,
        files: Vec<(String, PathBuf)>,
    },
}

impl Request {
    /// Parses a request line (without or with its line end).
    pub fn parse(line: &str) -> Result<Request, String> {
        if let Some(rest) = line.strip_prefix("backup\t") {
            return Request::parse_backup(rest.trim_end_matches(['\r', '\n']));
        }
        if let Some(rest) = line.strip_prefix("spam train\t") {
            // `spam train<TAB>USER<TAB>spam|ham<TAB>site|user<TAB>MAILBOX`: a folder name may
            // hold spaces.
            let fields: Vec<&str> = rest
                .trim_end_matches(['\r', '\n'])
                .splitn(4, '\t')
                .collect();
            return match fields.as_slice() {
                [
                    user,
                    class @ ("spam" | "ham"),
                    scope @ ("site" | "user"),
                    mailbox,
                ] => Ok(Request::SpamTrain {
                    user: (*user).to_string(),
                    spam: *class == "spam",
                    mailbox: (*mailbox).to_string(),
                    site: *scope == "site",
                }),
                _ => Err("expected: spam train USER spam|ham site|user MAILBOX".into()),
            };
        }
        if let Some(rest) = line.strip_prefix("mailbox ") {
            return Request::parse_mailbox(rest.trim_end_matches(['\r', '\n']));
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let id = |w: &str| {
            w.parse::<MessageId>()
                .map_err(|_| format!("'{}' is not a message id", one_line(w)))
        };
        match words.as_slice() {
            ["list"] => Ok(Request::List),
            ["show", n] => Ok(Request::Show(id(n)?)),
            ["retry", n] => Ok(Request::Retry(id(n)?)),
            ["remove", n] => Ok(Request::Remove(id(n)?)),
            ["user", "del", address] => Ok(Request::DeleteUser((*address).to_string())),
            ["user", "rename", old, new] => {
                Ok(Request::RenameUser((*old).to_string(), (*new).to_string()))
            }
            ["user", "list"] => Ok(Request::UserList(None)),
            ["user", "list", domain] => Ok(Request::UserList(Some((*domain).to_string()))),
            ["user", "show", address] => Ok(Request::UserShow((*address).to_string())),
            ["auth", "blocked"] => Ok(Request::AuthBlocked),
            ["auth", "unblock", what] => Ok(Request::AuthUnblock((*what).to_string())),
            ["queue", "stats"] => Ok(Request::QueueStats),
            ["store", "stats"] => Ok(Request::StoreStats),
            ["store", "fsck"] => Ok(Request::StoreCheck),
            ["directory", "changed"] => Ok(Request::DirectoryChanged),
            ["spam", "stats", user] => Ok(Request::SpamStats((*user).to_string())),
            ["spam", "release", user] => Ok(Request::SpamRelease((*user).to_string())),
            ["acme", "renew"] => Ok(Request::AcmeRenew),
            ["report", "send"] => Ok(Request::ReportSend(None)),
            ["report", "send", now] => now
                .parse()
                .map(|now| Request::ReportSend(Some(now)))
                .map_err(|_| format!("'{}' is not a Unix time", one_line(now))),
            _ => Err(
                "expected: list | show ID | retry ID | remove ID | user del ADDRESS | \
                      user rename OLD NEW | user list [DOMAIN] | user show ADDRESS | \
                      auth blocked | auth unblock ADDRESS|USER | queue stats | store stats | \
                      store fsck | directory changed | acme renew | report send [UNIX]"
                    .into(),
            ),
        }
    }

    /// `import USER PATH` or `export USER FORMAT PATH`: the path is the rest of the line (it
    /// may hold spaces), and absolute (the server's working directory is not the CLI's).
    fn parse_mailbox(rest: &str) -> Result<Request, String> {
        let usage = "expected: mailbox import USER PATH | mailbox import-through-rules USER PATH \
                     | mailbox export USER maildir|mbox PATH";
        let (verb, rest) = rest.split_once(' ').ok_or(usage)?;
        let (user, rest) = rest.split_once(' ').ok_or(usage)?;
        let (format, path) = match verb {
            "import" | "import-through-rules" => (None, rest),
            "export" => {
                let (format, path) = rest.split_once(' ').ok_or(usage)?;
                let format = Format::parse(format)
                    .ok_or_else(|| format!("'{}' is not maildir or mbox", one_line(format)))?;
                (Some(format), path)
            }
            _ => return Err(usage.into()),
        };
        let path = PathBuf::from(path);
        if !path.is_absolute() {
            return Err(format!("{} is not an absolute path", path.display()));
        }
        let user = user.to_string();
        Ok(match format {
            None => Request::Import {
                user,
                path,
                rules: verb == "import-through-rules",
            },
            Some(format) => Request::Export { user, path, format },
        })
    }

    /// `backup<TAB>DEST<TAB>NAME=PATH...`: paths may hold spaces, never a tab or a line end
    /// (the CLI refuses those), and are absolute.
    fn parse_backup(rest: &str) -> Result<Request, String> {
        let mut fields = rest.split('\t');
        let dest = PathBuf::from(fields.next().unwrap_or(""));
        let mut files = Vec::new();
        for field in fields {
            let (name, path) = field
                .split_once('=')
                .ok_or_else(|| format!("'{}' is not NAME=PATH", one_line(field)))?;
            files.push((name.to_string(), PathBuf::from(path)));
        }
        for path in std::iter::once(&dest).chain(files.iter().map(|(_, p)| p)) {
            if !path.is_absolute() {
                return Err(format!("{} is not an absolute path", path.display()));
            }
        }
        Ok(Request::Backup { dest, files })
    }

    /// Whether the answer is streamed: progress lines, then a last line (see
    /// [`request_streaming`]).
    pub fn is_streaming(&self) -> bool {
        matches!(
            self,
            Request::Import { .. } | Request::Export { .. } | Request::Backup { .. }
        )
    }

    /// The request line, without its line end.
    pub fn line(&self) -> String {
        match self {
            Request::List => "list".into(),
            Request::Show(id) => format!("show {id}"),
            Request::Retry(id) => format!("retry {id}"),
            Request::Remove(id) => format!("remove {id}"),
            Request::DeleteUser(address) => format!("user del {address}"),
            Request::RenameUser(old, new) => format!("user rename {old} {new}"),
            Request::UserList(None) => "user list".into(),
            Request::UserList(Some(domain)) => format!("user list {domain}"),
            Request::UserShow(address) => format!("user show {address}"),
            Request::AuthBlocked => "auth blocked".into(),
            Request::AuthUnblock(what) => format!("auth unblock {what}"),
            Request::QueueStats => "queue stats".into(),
            Request::StoreStats => "store stats".into(),
            Request::StoreCheck => "store fsck".into(),
            Request::DirectoryChanged => "directory changed".into(),
            Request::SpamTrain {
                user,
                spam,
                mailbox,
                site,
            } => format!(
                "spam train\t{user}\t{}\t{}\t{mailbox}",
                if *spam { "spam" } else { "ham" },
                if *site { "site" } else { "user" }
            ),
            Request::SpamStats(user) => format!("spam stats {user}"),
            Request::SpamRelease(user) => format!("spam release {user}"),
            Request::AcmeRenew => "acme renew".to_string(),
            Request::ReportSend(None) => "report send".to_string(),
            Request::ReportSend(Some(now)) => format!("report send {now}"),
            Request::Import { user, path, rules } => format!(
                "mailbox {} {user} {}",
                if *rules {
                    "import-through-rules"
                } else {
                    "import"
                },
                path.display()
            ),
            Request::Export { user, path, format } => {
                format!("mailbox export {user} {} {}", format.name(), path.display())
            }
            Request::Backup { dest, files } => {
                let mut line = format!("backup\t{}", dest.display());
                for (name, path) in files {
                    line.push_str(&format!("\t{name}={}", path.display()));
                }
                line
            }
        }
    }

    /// Whether the queue alone answers it (so the CLI can run it without a server).
    pub fn is_queue(&self) -> bool {
        matches!(
            self,
            Request::List
                | Request::Show(_)
                | Request::Retry(_)
                | Request::Remove(_)
                | Request::QueueStats
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_print_back() {
        for r in [
            Request::List,
            Request::Show(7),
            Request::Retry(8),
            Request::Remove(u64::MAX),
            Request::DeleteUser("a@example.org".into()),
            Request::RenameUser("a@example.org".into(), "b@example.org".into()),
            Request::UserList(None),
            Request::UserList(Some("example.org".into())),
            Request::UserShow("a@example.org".into()),
            Request::AuthBlocked,
            Request::AuthUnblock("192.0.2.1".into()),
            Request::QueueStats,
            Request::StoreStats,
            Request::StoreCheck,
            Request::DirectoryChanged,
            Request::ReportSend(None),
            Request::ReportSend(Some(1_700_000_000)),
            Request::Import {
                user: "a@example.org".into(),
                path: "/tmp/with space/Maildir".into(),
                rules: false,
            },
            Request::Import {
                user: "a@example.org".into(),
                path: "/tmp/in".into(),
                rules: true,
            },
            Request::Export {
                user: "a@example.org".into(),
                path: "/tmp/out".into(),
                format: Format::Mbox,
            },
            Request::Backup {
                dest: "/backup/with space".into(),
                files: vec![
                    ("config".into(), "/etc/mailstow.toml".into()),
                    ("tls_cert".into(), "/var/lib/mailstow/tls/cert.pem".into()),
                ],
            },
            Request::Backup {
                dest: "/b".into(),
                files: Vec::new(),
            },
        ] {
            assert_eq!(Request::parse(&format!("{}\r\n", r.line())), Ok(r));
        }
        assert!(Request::parse("show").is_err());
        assert!(Request::parse("show x").is_err());
        assert!(Request::parse("list 1").is_err());
        assert!(Request::parse("flush").is_err());
        assert!(Request::parse("mailbox import a@b relative/path").is_err());
        assert!(Request::parse("mailbox export a@b tar /x").is_err());
        assert!(Request::parse("mailbox import a@b").is_err());
        assert!(Request::parse("backup\trelative").is_err());
        assert!(Request::parse("backup\t/b\tconfig").is_err());
    }
}

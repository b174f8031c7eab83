//! The file system's configuration (`fs.toml`, docs/mailfs.md 10): the accounts, their
//! groups, and every tunable, as the CLI parses it, and [`Config::check`], which the CLI
//! runs on what it parsed. This crate reads no file of configuration: the CLI
//! (`mailstow fs`) reads `fs.toml` and the secret files it names (`passphrase_file`,
//! `password_file`) into `passphrase` and `password` before the engine sees the config.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::FsError;

pub const BLOCK_SIZE_MIN: u32 = 4096;
pub const BLOCK_SIZE_MAX: u32 = 16 << 20;
/// RAID indexes are one byte in every envelope.
pub const ACCOUNTS_MAX: usize = 255;
pub const CONNECTIONS_MAX: usize = 64;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub fs: FsSection,
    #[serde(default)]
    pub cache: CacheSection,
    #[serde(default)]
    pub encryption: EncryptionSection,
    #[serde(rename = "group", default)]
    pub groups: Vec<GroupSection>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Sync,
    Async,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Read-one/write-all.
    Strong,
    /// Read-fast/write-fast with lazy replication.
    Fast,
}

/// Longest a directory change may wait unwritten in the batch (`metadata_batch_ms`).
pub const METADATA_BATCH_MS_MAX: u64 = 10_000;
/// Largest `log_pages_max`: a mount replays at most this many pages at open.
pub const LOG_PAGES_MAX_MAX: u64 = 65_536;
/// Bounds of `member_deadline_ms`: shorter than a loaded server's pause between two
/// replies would mark members down that are only busy; longer is the stall the deadline
/// exists to prevent.
pub const MEMBER_DEADLINE_MS_MIN: u64 = 100;
pub const MEMBER_DEADLINE_MS_MAX: u64 = 60_000;
/// Largest `versions_max`: the kept lists are held in memory (and bounded again by
/// `fs::reclaim::RECLAIM_BLOCKS_MAX`).
pub const VERSIONS_MAX_MAX: usize = 1024;
/// Longest the kernel may remember that a name is absent (`negative_lookup_ms`): the
/// engine sees no change but its own (one writer per file system, docs/mailfs.md 13), so
/// this only bounds how late a name another writer made would show.
pub const NEGATIVE_LOOKUP_MS_MAX: u64 = 10_000;
/// Longest the kernel may keep names and attributes (`attr_cache_ms`): as for negative
/// entries, the mount's own changes reach the kernel at once, so this bounds only how late
/// another writer's change would show.
pub const ATTR_CACHE_MS_MAX: u64 = 60_000;
/// Longest `reclaim_delay_ms`: an hour (longer is what gc's `retention` is for).
pub const RECLAIM_DELAY_MS_MAX: u64 = 3_600_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FsSection {
    pub block_size: u32,
    pub folder: String,
    pub mode: Mode,
    pub strategy: Strategy,
    /// How long a directory change may wait to be batched with others into one log page
    /// (docs/mailfs.md 12a); fsync and unmount write the batch at once. 0: every change
    /// is its own page, written before the operation returns.
    pub metadata_batch_ms: u64,
    /// Log pages after which the background writer folds the log into directory messages
    /// (a checkpoint), so a mount replays at most this many pages.
    pub log_pages_max: u64,
    /// Directory versions younger than this are kept by gc ("7d", "12h", "30m", "0").
    pub retention: String,
    /// Unreferenced blocks younger than this are kept by gc: they may belong to a write in
    /// flight on a mounted client.
    pub orphan_grace: String,
    /// The mount removes the blocks its own commits superseded (docs/mailfs.md 8,
    /// "Reclaim"); false: every version stays for `retention`, until gc.
    pub reclaim: bool,
    /// Superseded versions of a file rewritten in place whose blocks reclaim keeps (they
    /// stay restorable for `retention`).
    pub versions_max: usize,
    /// How long a superseded block stays after the commit that superseded it: a read that
    /// took the old block list a moment before still finds it.
    pub reclaim_delay_ms: u64,
    pub dedup: bool,
    /// How long a command the server may think about at length (listing the folder,
    /// SEARCH, EXPUNGE, QUOTA, CREATE) may go without a byte from it; never less than
    /// `member_deadline_ms`.
    pub timeout_ms: u64,
    /// How long a member may stay silent while the mount waits for it (connecting, its
    /// greeting, each read or write of an APPEND, FETCH or NOOP) before the command fails
    /// and the member is marked down (docs/mailfs.md 7). Commands queued behind it for
    /// one of its connections fail at the same moment.
    pub member_deadline_ms: u64,
    /// How long a read waits for its preferred member before it asks the next one too, and
    /// a write for a member that takes nothing before it sends what that member holds up
    /// to the next one (hedging, docs/mailfs.md 7): at least 4x that member's latency, at
    /// most half of `member_deadline_ms`. 0: never asks a second member before the first
    /// fails.
    pub hedge_delay_ms: u64,
    /// Members of a group that must hold a write before it is acknowledged; the others
    /// are owed it through their backlogs (M6). Default: 1 with `strategy = "fast"`,
    /// every member with `"strong"`. Fewer live members than this still acknowledge a
    /// write (the group runs degraded), as long as one of them took it.
    pub write_quorum: Option<usize>,
    /// Blocks fetched ahead of a sequential reader.
    pub readahead_blocks: usize,
    /// Dirty bytes one open file may hold in memory before full blocks are uploaded early.
    pub dirty_bytes_max: u64,
    /// Bypass the kernel's page cache for file data (FOPEN_DIRECT_IO, where the kernel
    /// still allows shared mmap of such files): no second copy of each byte beside the
    /// engine's caches, but every `read` and `write` is a request, however small. Off by
    /// default; takes precedence over `writeback_cache`.
    pub direct_io: bool,
    /// The kernel's page cache holds writes and hands them over in large pieces (FUSE's
    /// writeback cache, as JuiceFS's `--writeback_cache`): many small `write` calls cost
    /// memory copies instead of a request each. On by default (docs/mailfs.md 6): Postmark
    /// runs in less than half the time, and large files as fast as with `direct_io`.
    pub writeback_cache: bool,
    /// How long the kernel may answer a lookup of a missing name itself (a negative
    /// entry, docs/mailfs.md 6): a program that probes the same missing paths again and
    /// again (git does) makes one request per name instead of one per probe. The mount's
    /// own create, mkdir, symlink, link and rename replace the kernel's negative entry at
    /// once; 0 makes every lookup of a missing name a request.
    pub negative_lookup_ms: u64,
    /// How long the kernel may keep a name's entry and a file's attributes before it asks
    /// the mount again (docs/mailfs.md 6). Changes made through the mount reach the kernel
    /// with their replies (or the kernel marks them stale itself), so a longer time saves
    /// the LOOKUP and GETATTR requests of names and files used again (a `git clone`
    /// stats each file it wrote).
    pub attr_cache_ms: u64,
}

impl Default for FsSection {
    fn default() -> Self {
        FsSection {
            block_size: 1 << 20,
            folder: "mailfs".into(),
            mode: Mode::Sync,
            strategy: Strategy::Strong,
            metadata_batch_ms: 50,
            log_pages_max: 256,
            retention: "7d".into(),
            orphan_grace: "1h".into(),
            reclaim: true,
            versions_max: 8,
            reclaim_delay_ms: 2000,
            dedup: false,
            timeout_ms: 10_000,
            member_deadline_ms: 2_000,
            hedge_delay_ms: 50,
            write_quorum: None,
            readahead_blocks: 8,
            dirty_bytes_max: 256 << 20,
            direct_io: false,
            writeback_cache: true,
            negative_lookup_ms: 1000,
            attr_cache_ms: 10_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheSection {
    pub dir: PathBuf,
    pub disk_bytes: u64,
    pub memory_bytes: u64,
    pub journal_bytes_max: u64,
    /// Also keep blocks this mount wrote in the disk cache (not only blocks it read): saves
    /// a download after a remount, at the cost of writing every block locally too.
    pub keep_written: bool,
    /// A sequential read further than this into its stream is a scan (a copy, a backup, a
    /// media file): blocks its read-ahead fetches go to the disk cache only when fetched a
    /// second time, so one pass over a large file neither pays a local write of every byte
    /// nor evicts the cache's working set. 0: every fetched block goes to the disk cache.
    pub scan_bytes: u64,
}

impl Default for CacheSection {
    fn default() -> Self {
        CacheSection {
            dir: PathBuf::from("/var/cache/mailstow-fs"),
            disk_bytes: 4 << 30,
            memory_bytes: 256 << 20,
            journal_bytes_max: 1 << 30,
            keep_written: false,
            scan_bytes: 32 << 20,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncryptionSection {
    /// "xchacha20poly1305" (default) or "none" (MAC only, still tamper-evident).
    pub cipher: String,
    pub passphrase: Option<String>,
    /// Read into `passphrase` by the CLI.
    pub passphrase_file: Option<PathBuf>,
}

impl Default for EncryptionSection {
    fn default() -> Self {
        EncryptionSection {
            cipher: "auto".into(),
            passphrase: None,
            passphrase_file: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSection {
    #[serde(default)]
    pub name: String,
    #[serde(rename = "account")]
    pub accounts: Vec<AccountSection>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    Implicit,
    Starttls,
    None,
}

/// How message bodies cross the wire (docs/mailfs.md 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transfer {
    /// Base64 bodies, read back with `BODY.PEEK[TEXT]` and decoded here. The default:
    /// servers that store parts in base64 (Dovecot converts binary parts on APPEND) then
    /// neither encode on APPEND nor decode on FETCH, which costs them more than the third
    /// more bytes on the wire.
    #[default]
    Base64,
    /// Binary bodies as literal8 with `BINARY.PEEK[1]` (RFC 3516) when the server offers
    /// BINARY, base64 otherwise: a third less traffic, for servers that keep binary parts.
    Binary,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountSection {
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    #[serde(default = "default_tls")]
    pub tls: TlsMode,
    /// Accept a self-signed certificate (tests, private servers).
    #[serde(default)]
    pub accept_invalid_certs: bool,
    pub user: String,
    pub password: Option<String>,
    /// Read into `password` by the CLI.
    pub password_file: Option<PathBuf>,
    #[serde(default = "default_connections")]
    pub connections: usize,
    #[serde(default)]
    pub transfer: Transfer,
    /// Free space to assume when the server has no QUOTA.
    #[serde(default)]
    pub capacity_bytes: Option<u64>,
}

fn default_port() -> u16 {
    993
}
fn default_tls() -> TlsMode {
    TlsMode::Implicit
}
fn default_connections() -> usize {
    2
}

impl Config {
    /// Parses a config from TOML text and checks it: for this crate's tests (the CLI
    /// parses `fs.toml` itself, then calls [`Config::check`]).
    #[cfg(test)]
    pub(crate) fn parse(text: &str) -> Result<Config, FsError> {
        let config: Config = toml::from_str(text).map_err(|e| FsError::Config(e.to_string()))?;
        config.check()?;
        Ok(config)
    }

    /// Checks what was parsed: sizes and counts in range, every account with a password,
    /// a passphrase unless the cipher is "none", durations that parse.
    pub fn check(&self) -> Result<(), FsError> {
        let bad = |m: String| Err(FsError::Config(m));
        let bs = self.fs.block_size;
        if !(BLOCK_SIZE_MIN..=BLOCK_SIZE_MAX).contains(&bs) || !bs.is_power_of_two() {
            return bad(format!(
                "fs.block_size {bs}: a power of two from {BLOCK_SIZE_MIN} to {BLOCK_SIZE_MAX}"
            ));
        }
        if self.fs.metadata_batch_ms > METADATA_BATCH_MS_MAX {
            return bad(format!(
                "fs.metadata_batch_ms {}: at most {METADATA_BATCH_MS_MAX} (changes wait that long unwritten)",
                self.fs.metadata_batch_ms
            ));
        }
        if self.fs.negative_lookup_ms > NEGATIVE_LOOKUP_MS_MAX {
            return bad(format!(
                "fs.negative_lookup_ms {}: at most {NEGATIVE_LOOKUP_MS_MAX}",
                self.fs.negative_lookup_ms
            ));
        }
        if self.fs.attr_cache_ms > ATTR_CACHE_MS_MAX {
            return bad(format!(
                "fs.attr_cache_ms {}: at most {ATTR_CACHE_MS_MAX}",
                self.fs.attr_cache_ms
            ));
        }
        if !(1..=LOG_PAGES_MAX_MAX).contains(&self.fs.log_pages_max) {
            return bad(format!(
                "fs.log_pages_max {}: from 1 to {LOG_PAGES_MAX_MAX}",
                self.fs.log_pages_max
            ));
        }
        if !(MEMBER_DEADLINE_MS_MIN..=MEMBER_DEADLINE_MS_MAX).contains(&self.fs.member_deadline_ms)
        {
            return bad(format!(
                "fs.member_deadline_ms {}: from {MEMBER_DEADLINE_MS_MIN} to {MEMBER_DEADLINE_MS_MAX}",
                self.fs.member_deadline_ms
            ));
        }
        if self.fs.hedge_delay_ms > self.fs.member_deadline_ms {
            return bad(format!(
                "fs.hedge_delay_ms {}: from 0 (off) to member_deadline_ms ({})",
                self.fs.hedge_delay_ms, self.fs.member_deadline_ms
            ));
        }
        if let Some(q) = self.fs.write_quorum
            && !(1..=ACCOUNTS_MAX).contains(&q)
        {
            return bad(format!("fs.write_quorum {q}: from 1 to {ACCOUNTS_MAX}"));
        }
        if self.fs.versions_max > VERSIONS_MAX_MAX {
            return bad(format!(
                "fs.versions_max {}: at most {VERSIONS_MAX_MAX} (or reclaim = false)",
                self.fs.versions_max
            ));
        }
        if self.fs.reclaim_delay_ms > RECLAIM_DELAY_MS_MAX {
            return bad(format!(
                "fs.reclaim_delay_ms {}: at most {RECLAIM_DELAY_MS_MAX}",
                self.fs.reclaim_delay_ms
            ));
        }
        if self.groups.is_empty() {
            return bad("no [[group]] with accounts".into());
        }
        let accounts: usize = self.groups.iter().map(|g| g.accounts.len()).sum();
        if accounts > ACCOUNTS_MAX {
            return bad(format!("{accounts} accounts; at most {ACCOUNTS_MAX}"));
        }
        for (i, g) in self.groups.iter().enumerate() {
            if g.accounts.is_empty() {
                return bad(format!("group {i} ({}) has no account", g.name));
            }
            for a in &g.accounts {
                if a.password.is_none() && a.password_file.is_none() {
                    return bad(format!("account {}: password or password_file", a.user));
                }
                if a.connections == 0 || a.connections > CONNECTIONS_MAX {
                    return bad(format!(
                        "account {}: connections from 1 to {CONNECTIONS_MAX}",
                        a.user
                    ));
                }
            }
        }
        match self.encryption.cipher.as_str() {
            "auto" | "xchacha20poly1305" | "aes-256-gcm" => {
                if self.encryption.passphrase.is_none() && self.encryption.passphrase_file.is_none()
                {
                    return bad(
                        "encryption: passphrase or passphrase_file (or cipher = \"none\")".into(),
                    );
                }
            }
            "none" => {}
            other => {
                return bad(format!(
                    "encryption.cipher {other:?}: auto, xchacha20poly1305, aes-256-gcm or none"
                ));
            }
        }
        if self.fs.folder.is_empty() || self.fs.folder.contains(['\r', '\n', '"', '\\']) {
            return bad(format!("fs.folder {:?}", self.fs.folder));
        }
        parse_duration(&self.fs.retention)?;
        parse_duration(&self.fs.orphan_grace)?;
        Ok(())
    }

    /// The silence allowed to a slow command (`timeout_ms`), never below the deadline.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.fs.timeout_ms.max(self.fs.member_deadline_ms))
    }

    /// The silence after which a member is marked down (`member_deadline_ms`).
    pub fn member_deadline(&self) -> Duration {
        Duration::from_millis(self.fs.member_deadline_ms)
    }

    /// The configured floor of the hedge delay (`hedge_delay_ms`); None: reads are not
    /// hedged.
    pub fn hedge_delay(&self) -> Option<Duration> {
        (self.fs.hedge_delay_ms > 0).then(|| Duration::from_millis(self.fs.hedge_delay_ms))
    }

    /// Members of a group of `members` that must hold a write before it is acknowledged.
    pub fn write_quorum(&self, members: usize) -> usize {
        let q = self.fs.write_quorum.unwrap_or(match self.fs.strategy {
            Strategy::Fast => 1,
            Strategy::Strong => members,
        });
        q.clamp(1, members.max(1))
    }

    /// The passphrase, if any. A `passphrase_file` the CLI has not read into `passphrase`
    /// is an error: this crate reads no configuration file.
    pub fn passphrase(&self) -> Result<Option<String>, FsError> {
        match (
            &self.encryption.passphrase,
            &self.encryption.passphrase_file,
        ) {
            (Some(p), _) => Ok(Some(p.clone())),
            (None, Some(f)) => Err(FsError::Config(format!(
                "encryption.passphrase_file {}: not read",
                f.display()
            ))),
            (None, None) => Ok(None),
        }
    }
}

impl AccountSection {
    /// The password. A `password_file` the CLI has not read into `password` is an error:
    /// this crate reads no configuration file.
    pub fn password(&self) -> Result<String, FsError> {
        match (&self.password, &self.password_file) {
            (Some(p), _) => Ok(p.clone()),
            (None, Some(f)) => Err(FsError::Config(format!(
                "account {}: password_file {}: not read",
                self.user,
                f.display()
            ))),
            (None, None) => Err(FsError::Config(format!(
                "account {}: no password",
                self.user
            ))),
        }
    }
}

/// "7d", "12h", "30m", "45s", "0".
pub fn parse_duration(s: &str) -> Result<Duration, FsError> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let (num, unit) = s.split_at(s.len().saturating_sub(1));
    let n: u64 = num
        .parse()
        .map_err(|_| FsError::Config(format!("duration {s:?}: like 7d, 12h, 30m, 45s or 0")))?;
    let secs = match unit {
        "d" => n * 86_400,
        "h" => n * 3_600,
        "m" => n * 60,
        "s" => n,
        _ => {
            return Err(FsError::Config(format!(
                "duration {s:?}: unit d, h, m or s"
            )));
        }
    };
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOUR: &str = r#"
[fs]
block_size = 1048576
[encryption]
passphrase = "x"
[[group]]
name = "a"
[[group.account]]
host = "127.0.0.1"
user = "u1"
password = "p"
[[group.account]]
host = "127.0.0.1"
user = "u2"
password = "p"
[[group]]
name = "b"
[[group.account]]
host = "127.0.0.1"
user = "u3"
password = "p"
connections = 1
"#;

    #[test]
    fn parses_groups_and_defaults() {
        let c = Config::parse(FOUR).unwrap();
        assert_eq!(c.groups.len(), 2);
        assert_eq!(c.groups[0].accounts.len(), 2);
        assert_eq!(c.groups[1].accounts[0].connections, 1);
        assert_eq!(c.groups[0].accounts[0].port, 993);
        assert_eq!(c.fs.mode, Mode::Sync);
        assert_eq!(c.fs.strategy, Strategy::Strong);
        // The page cache with its writeback cache, unless direct I/O is asked for.
        assert!(c.fs.writeback_cache && !c.fs.direct_io);
        let direct = Config::parse(&FOUR.replace("[fs]", "[fs]\ndirect_io = true")).unwrap();
        assert!(direct.fs.direct_io);
        // A member is marked down after 2 s of silence; slow commands get timeout_ms.
        assert_eq!(c.member_deadline(), Duration::from_secs(2));
        assert_eq!(c.timeout(), Duration::from_secs(10));
        let short = Config::parse(&FOUR.replace("[fs]", "[fs]\ntimeout_ms = 500")).unwrap();
        assert_eq!(short.timeout(), Duration::from_secs(2));
        // Reads ask a second member after 50 ms; 0 turns that off.
        assert_eq!(c.hedge_delay(), Some(Duration::from_millis(50)));
        let off = Config::parse(&FOUR.replace("[fs]", "[fs]\nhedge_delay_ms = 0")).unwrap();
        assert_eq!(off.hedge_delay(), None);
        // The quorum: every member with strong, one with fast, at most the group.
        assert_eq!((c.write_quorum(2), c.write_quorum(1)), (2, 1));
        let fast = Config::parse(&FOUR.replace("[fs]", "[fs]\nstrategy = \"fast\"")).unwrap();
        assert_eq!(fast.write_quorum(3), 1);
        let two = Config::parse(&FOUR.replace("[fs]", "[fs]\nwrite_quorum = 2")).unwrap();
        assert_eq!((two.write_quorum(3), two.write_quorum(1)), (2, 1));
    }

    #[test]
    fn bad_configs_are_explained() {
        for (text, want) in [
            (FOUR.replace("1048576", "1000"), "block_size"),
            (FOUR.replace("passphrase = \"x\"", ""), "passphrase"),
            (
                FOUR.replace("connections = 1", "connections = 0"),
                "connections",
            ),
            (FOUR.replace("[fs]", "[fs]\nretention = \"7w\""), "duration"),
            (FOUR.replace("[fs]", "[fs]\nbogus = 1"), "bogus"),
            (
                FOUR.replace("[fs]", "[fs]\nmetadata_batch_ms = 10001"),
                "metadata_batch_ms 10001: at most 10000",
            ),
            (
                FOUR.replace("[fs]", "[fs]\nnegative_lookup_ms = 10001"),
                "negative_lookup_ms 10001: at most 10000",
            ),
            (
                FOUR.replace("[fs]", "[fs]\nattr_cache_ms = 60001"),
                "attr_cache_ms 60001: at most 60000",
            ),
            (
                FOUR.replace("[fs]", "[fs]\nlog_pages_max = 0"),
                "log_pages_max 0: from 1 to 65536",
            ),
            (
                FOUR.replace("[fs]", "[fs]\nmember_deadline_ms = 99"),
                "member_deadline_ms 99: from 100 to 60000",
            ),
            (
                FOUR.replace("[fs]", "[fs]\nmember_deadline_ms = 60001"),
                "member_deadline_ms 60001: from 100 to 60000",
            ),
            (
                FOUR.replace("[fs]", "[fs]\nhedge_delay_ms = 2001"),
                "hedge_delay_ms 2001: from 0 (off) to member_deadline_ms (2000)",
            ),
            (
                FOUR.replace("[fs]", "[fs]\nwrite_quorum = 0"),
                "write_quorum 0: from 1 to 255",
            ),
            (
                FOUR.replace("[fs]", "[fs]\nversions_max = 1025"),
                "versions_max 1025: at most 1024",
            ),
            (
                FOUR.replace("[fs]", "[fs]\nreclaim_delay_ms = 3600001"),
                "reclaim_delay_ms 3600001: at most 3600000",
            ),
            ("[fs]\n".to_string(), "no [[group]]"),
        ] {
            let err = Config::parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{err} lacks {want}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("7d").unwrap(), Duration::from_secs(604_800));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("").is_err());
        assert!(parse_duration("d").is_err());
    }
}

//! Maildir++ trees: reading ([`scan_tree`], [`scan_folder`]) and writing ([`MaildirWriter`]).
//!
//! A tree's root holds INBOX (`cur/`, `new/`, `tmp/`); every directory `.A.B` directly under it
//! is the folder `A/B` (the separator `.` maps to the store's `/`), its name in modified UTF-7
//! as Dovecot writes it (a name that is not valid modified UTF-7, as Python's `mailbox` writes
//! non-ASCII names, is taken as UTF-8). A message's flags are the letters after `:2,` in its
//! file name, up to a `,`: `D` draft, `F` flagged, `P` passed (the keyword `$Forwarded`), `R`
//! replied (answered), `S` seen, `T` trashed (deleted), and Dovecot's keyword letters `a`..`z`
//! named in the folder's `dovecot-keywords`. Files in `new/` have no flags. The internal date
//! is the file's mtime (Dovecot's convention; Python's `mailbox` sets it from the message's
//! date). UIDs and UIDVALIDITY come from `dovecot-uidlist` (or Courier's `courierimapuiddb`);
//! files it does not list get the UIDs Dovecot would give them next, in mtime order.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use crate::uidlist::{base_name, parse_keywords, parse_uidlist, write_keywords, write_uidlist};
use crate::{FORWARDED, Flags, mutf7};

/// One message file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaildirMessage {
    pub path: PathBuf,
    /// From the folder's uidlist, or given after its listed ones; `None` without a uidlist.
    pub uid: Option<u32>,
    pub flags: Flags,
    /// Keyword names (`$Forwarded` for `P` first, then the letters in file-name order).
    pub keywords: Vec<String>,
    /// Unix seconds.
    pub mtime: i64,
    pub size: u64,
}

/// One folder of a tree, its messages in the order they should be imported (UID order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaildirFolder {
    /// Hierarchy levels, decoded; empty for the root (INBOX).
    pub path: Vec<String>,
    pub dir: PathBuf,
    pub uidvalidity: Option<u32>,
    /// The next UID: the uidlist's, raised past any UID given to unlisted files.
    pub uidnext: Option<u32>,
    pub messages: Vec<MaildirMessage>,
    /// What could not be read or made sense of (a bad uidlist, keyword letters without a
    /// name, an unreadable file), each once.
    pub problems: Vec<String>,
}

/// A directory with `cur/` or `new/` is a maildir.
pub fn is_maildir(dir: &Path) -> bool {
    dir.join("cur").is_dir() || dir.join("new").is_dir()
}

/// What a file name's info (`:2,...`) says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    pub flags: Flags,
    /// `P`: passed (forwarded).
    pub passed: bool,
    /// Dovecot's keyword letters, `b'a'..=b'z'`, in name order.
    pub letters: Vec<u8>,
}

/// Parses the flags of a maildir file name: the letters after the last `:2,`, up to a `,`.
pub fn parse_info(filename: &str) -> Info {
    let mut info = Info::default();
    let Some(at) = filename.rfind(":2,") else {
        return info;
    };
    for b in filename[at + 3..].bytes().take_while(|&b| b != b',') {
        match b {
            b'D' => info.flags.draft = true,
            b'F' => info.flags.flagged = true,
            b'P' => info.passed = true,
            b'R' => info.flags.answered = true,
            b'S' => info.flags.seen = true,
            b'T' => info.flags.deleted = true,
            b'a'..=b'z' if !info.letters.contains(&b) => info.letters.push(b),
            _ => {}
        }
    }
    info
}

/// The info part of a file name, `:2,` and the flags in ASCII order (as the maildir
/// specification asks), then keyword letters.
pub fn info_string(info: &Info) -> String {
    let f = &info.flags;
    let mut s = String::from(":2,");
    for (on, c) in [
        (f.draft, 'D'),
        (f.flagged, 'F'),
        (info.passed, 'P'),
        (f.answered, 'R'),
        (f.seen, 'S'),
        (f.deleted, 'T'),
    ] {
        if on {
            s.push(c);
        }
    }
    let mut letters = info.letters.clone();
    letters.sort_unstable();
    letters.dedup();
    s.extend(letters.into_iter().map(char::from));
    s
}

/// The folder a Maildir++ directory name stands for: `.A.B` → `["A", "B"]`. `None` for a
/// name that is not a folder (no leading dot, an empty level, `.` or `..`).
pub fn folder_path(dir_name: &str) -> Option<Vec<String>> {
    let rest = dir_name.strip_prefix('.')?;
    if rest.is_empty() {
        return None;
    }
    rest.split('.')
        .map(|part| {
            if part.is_empty() {
                return None;
            }
            Some(mutf7::decode(part).unwrap_or_else(|| part.to_string()))
        })
        .collect()
}

/// The Maildir++ directory name of a folder: `["A", "B"]` → `.A.B`, each level in modified
/// UTF-7 with a `.` inside a level escaped as `&AC4-` (which [`folder_path`] reads back).
pub fn folder_dir_name(path: &[String]) -> String {
    path.iter()
        .map(|p| format!(".{}", mutf7::encode(p, &['.'])))
        .collect()
}

/// The root (INBOX) and every Maildir++ folder under it, root first, then by name.
pub fn scan_tree(root: &Path) -> io::Result<Vec<MaildirFolder>> {
    let mut folders = vec![scan_folder(root, Vec::new())?];
    let mut subs: Vec<(Vec<String>, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !entry.file_type()?.is_dir() {
            continue;
        }
        if let Some(path) = folder_path(&name)
            && is_maildir(&entry.path())
        {
            subs.push((path, entry.path()));
        }
    }
    subs.sort();
    for (path, dir) in subs {
        folders.push(scan_folder(&dir, path)?);
    }
    Ok(folders)
}

/// Reads one maildir folder's file list, uidlist and keywords (not the messages).
pub fn scan_folder(dir: &Path, path: Vec<String>) -> io::Result<MaildirFolder> {
    let mut problems: Vec<String> = Vec::new();
    let mut uidlist = None;
    for name in ["dovecot-uidlist", "courierimapuiddb"] {
        match std::fs::read(dir.join(name)) {
            Ok(bytes) => {
                match parse_uidlist(&bytes) {
                    Ok(list) => {
                        if !list.problems.is_empty() {
                            problems.push(format!(
                                "{name}: {} lines skipped (first: {})",
                                list.problems.len(),
                                list.problems[0]
                            ));
                        }
                        uidlist = Some(list);
                    }
                    Err(e) => problems.push(format!("{name} not used: {e}")),
                }
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => problems.push(format!("{name} not read: {e}")),
        }
    }
    let letters = match std::fs::read(dir.join("dovecot-keywords")) {
        Ok(bytes) => parse_keywords(&bytes),
        Err(_) => BTreeMap::new(),
    };
    let mut unnamed: BTreeSet<char> = BTreeSet::new();
    let mut listed: Vec<MaildirMessage> = Vec::new();
    let mut unlisted: Vec<(String, MaildirMessage)> = Vec::new();
    for sub in ["cur", "new"] {
        let entries = match std::fs::read_dir(dir.join(sub)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let file_name = entry.file_name();
            let Some(name) = file_name.to_str() else {
                problems.push(format!(
                    "{}: a file name that is not UTF-8 is skipped",
                    entry.path().display()
                ));
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let meta = match entry.metadata() {
                Ok(m) if m.is_file() => m,
                Ok(_) => continue,
                Err(e) => {
                    problems.push(format!("{}: {e}", entry.path().display()));
                    continue;
                }
            };
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| match t.duration_since(std::time::UNIX_EPOCH) {
                    Ok(d) => i64::try_from(d.as_secs()).ok(),
                    Err(e) => i64::try_from(e.duration().as_secs()).ok().map(|s| -s),
                })
                .unwrap_or(0);
            let info = if sub == "cur" {
                parse_info(name)
            } else {
                Info::default()
            };
            let mut keywords = Vec::new();
            if info.passed {
                keywords.push(FORWARDED.to_string());
            }
            for l in &info.letters {
                match letters.get(&(l - b'a')) {
                    Some(k) if !keywords.contains(k) => keywords.push(k.clone()),
                    Some(_) => {}
                    None => {
                        unnamed.insert(*l as char);
                    }
                }
            }
            let message = MaildirMessage {
                path: entry.path(),
                uid: None,
                flags: info.flags,
                keywords,
                mtime,
                size: meta.len(),
            };
            match uidlist
                .as_ref()
                .and_then(|l| l.records.get(base_name(name)))
            {
                Some(&uid) => listed.push(MaildirMessage {
                    uid: Some(uid),
                    ..message
                }),
                None => unlisted.push((name.to_string(), message)),
            }
        }
    }
    if !unnamed.is_empty() {
        problems.push(format!(
            "keyword letters {} have no name in dovecot-keywords and are left off",
            unnamed.iter().collect::<String>()
        ));
    }
    listed.sort_by_key(|m| m.uid);
    // Two files with the same UID (a copy made behind Dovecot's back): the second is unlisted.
    let mut messages: Vec<MaildirMessage> = Vec::with_capacity(listed.len() + unlisted.len());
    for m in listed {
        if messages.last().is_some_and(|last| last.uid == m.uid) {
            let name = m.path.file_name().map(|n| n.to_string_lossy().into_owned());
            unlisted.push((name.unwrap_or_default(), MaildirMessage { uid: None, ..m }));
        } else {
            messages.push(m);
        }
    }
    unlisted.sort_by(|a, b| (a.1.mtime, &a.0).cmp(&(b.1.mtime, &b.0)));
    let (uidvalidity, uidnext) = match &uidlist {
        Some(list) => {
            let mut next = list.uidnext.max(
                messages
                    .last()
                    .and_then(|m| m.uid)
                    .map_or(1, |u| u.saturating_add(1)),
            );
            for (_, m) in unlisted.iter_mut() {
                m.uid = Some(next);
                next = next.saturating_add(1);
            }
            (Some(list.uidvalidity), Some(next))
        }
        None => (None, None),
    };
    messages.extend(unlisted.into_iter().map(|(_, m)| m));
    Ok(MaildirFolder {
        path,
        dir: dir.to_path_buf(),
        uidvalidity,
        uidnext,
        messages,
        problems,
    })
}

/// Writes a Maildir++ tree that Dovecot (and [`scan_tree`]) read back with UIDs, UIDVALIDITY,
/// flags, keywords and internal dates.
pub struct MaildirWriter {
    root: PathBuf,
}

/// A message to write.
#[derive(Debug, Clone, Copy)]
pub struct OutMessage<'a> {
    pub uid: u32,
    pub flags: Flags,
    pub keywords: &'a [String],
    /// Unix seconds: the file's mtime.
    pub internal_date: i64,
    /// The file's bytes, as they are.
    pub content: &'a [u8],
}

/// One folder being written; [`FolderWriter::finish`] writes its uidlist and keywords.
pub struct FolderWriter {
    dir: PathBuf,
    uidvalidity: u32,
    letters: Vec<String>,
    records: Vec<(u32, String)>,
    unwritten: BTreeSet<String>,
}

fn make_maildir(dir: &Path) -> io::Result<()> {
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    Ok(())
}

impl MaildirWriter {
    /// Creates the tree at `root`, which must not exist or be an empty directory.
    pub fn create(root: &Path) -> io::Result<MaildirWriter> {
        if root.exists() && std::fs::read_dir(root)?.next().is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not empty", root.display()),
            ));
        }
        make_maildir(root)?;
        Ok(MaildirWriter {
            root: root.to_path_buf(),
        })
    }

    /// Starts a folder: the root for INBOX (an empty path), `.A.B` for `A/B`.
    pub fn folder(&self, path: &[String], uidvalidity: u32) -> io::Result<FolderWriter> {
        let dir = if path.is_empty() {
            self.root.clone()
        } else {
            self.root.join(folder_dir_name(path))
        };
        make_maildir(&dir)?;
        if !path.is_empty() {
            std::fs::File::create(dir.join("maildirfolder"))?;
        }
        Ok(FolderWriter {
            dir,
            uidvalidity,
            letters: Vec::new(),
            records: Vec::new(),
            unwritten: BTreeSet::new(),
        })
    }
}

impl FolderWriter {
    /// Writes one message into `cur/`, named `<date>.U<uid>V<uidvalidity>.mailstow,S=<size>,
    /// W=<size with CRLF>:2,<flags>`, mtime = internal date. Keywords get the folder's letters
    /// in order of first use; `$Forwarded` is also written as `P`. Past 26 keywords a folder
    /// has no letter left: those are not written (see [`FolderWriter::finish`]).
    pub fn write(&mut self, m: &OutMessage<'_>) -> io::Result<()> {
        let mut info = Info {
            flags: m.flags,
            ..Info::default()
        };
        for k in m.keywords {
            if k == FORWARDED {
                info.passed = true;
            }
            let index = match self.letters.iter().position(|x| x == k) {
                Some(i) => i,
                None if self.letters.len() < 26 => {
                    self.letters.push(k.clone());
                    self.letters.len() - 1
                }
                None => {
                    self.unwritten.insert(k.clone());
                    continue;
                }
            };
            info.letters.push(b'a' + index as u8);
        }
        let lf = memchr::memchr_iter(b'\n', m.content)
            .filter(|&i| i == 0 || m.content[i - 1] != b'\r')
            .count();
        let name = format!(
            "{}.U{}V{}.mailstow,S={},W={}{}",
            m.internal_date.max(0),
            m.uid,
            self.uidvalidity,
            m.content.len(),
            m.content.len() + lf,
            info_string(&info)
        );
        let path = self.dir.join("cur").join(&name);
        let mut file = std::fs::File::create(&path)?;
        file.write_all(m.content)?;
        let mtime = if m.internal_date >= 0 {
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(m.internal_date as u64)
        } else {
            std::time::UNIX_EPOCH - std::time::Duration::from_secs(m.internal_date.unsigned_abs())
        };
        file.set_modified(mtime)?;
        self.records.push((m.uid, name));
        Ok(())
    }

    /// Writes `dovecot-uidlist` (version 3) and `dovecot-keywords` (each to a temporary name,
    /// then renamed) and returns the keywords that got no letter.
    pub fn finish(self, uidnext: u32) -> io::Result<Vec<String>> {
        let replace = |name: &str, text: String| -> io::Result<()> {
            let tmp = self.dir.join(format!("{name}.tmp"));
            std::fs::write(&tmp, text)?;
            std::fs::rename(tmp, self.dir.join(name))
        };
        replace(
            "dovecot-uidlist",
            write_uidlist(self.uidvalidity, uidnext, &self.records),
        )?;
        if !self.letters.is_empty() {
            replace("dovecot-keywords", write_keywords(&self.letters))?;
        }
        Ok(self.unwritten.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_parses_and_prints_in_ascii_order() {
        let i = parse_info("1234.M1P2.host,S=10:2,TSRPFDba,extra");
        assert!(i.flags.draft && i.flags.flagged && i.flags.answered && i.flags.seen);
        assert!(i.flags.deleted && i.passed);
        assert_eq!(i.letters, b"ba");
        assert_eq!(info_string(&i), ":2,DFPRSTab");
        assert_eq!(parse_info("1234.M1P2.host"), Info::default());
        assert_eq!(parse_info("x:1,S"), Info::default());
    }

    #[test]
    fn folder_names() {
        assert_eq!(folder_path(".Work.old").unwrap(), vec!["Work", "old"]);
        assert_eq!(folder_path(".Entw&APw-rfe").unwrap(), vec!["Entwürfe"]);
        assert_eq!(folder_path(".Grüße").unwrap(), vec!["Grüße"]);
        for bad in ["Work", ".", "..", ".a..b", ".a."] {
            assert_eq!(folder_path(bad), None, "{bad}");
        }
        let path = vec!["v1.2".to_string(), "Entwürfe & co".to_string()];
        let name = folder_dir_name(&path);
        assert_eq!(name, ".v1&AC4-2.Entw&APw-rfe &- co");
        assert_eq!(folder_path(&name).unwrap(), path);
    }
}

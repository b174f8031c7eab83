//! `mailbox export`: a user's folders out to a Maildir++ tree or mbox files, flags,
//! keywords, internal dates, UIDs and UIDVALIDITY kept where the format can hold them.

use super::*;

/// The mbox file of a folder in an exported directory: `A/B` is `A.sbd/B` (Thunderbird's
/// layout, so `A` can be a folder with mail and with children), each level in modified UTF-7.
pub(super) fn mbox_file(root: &Path, folder: &str) -> PathBuf {
    let levels: Vec<&str> = folder.split('/').collect();
    let mut path = root.to_path_buf();
    for (i, level) in levels.iter().enumerate() {
        let name = mutf7::encode(level, &[]);
        if i + 1 < levels.len() {
            path.push(format!("{name}.sbd"));
        } else {
            path.push(name);
        }
    }
    path
}

/// The levels of a folder for the maildir writer: INBOX is the root.
pub(super) fn maildir_levels(folder: &str) -> Vec<String> {
    if folder.eq_ignore_ascii_case("INBOX") {
        Vec::new()
    } else {
        folder.split('/').map(str::to_string).collect()
    }
}

/// Writes every folder of `user` to `target` (which must not exist or be an empty
/// directory) as a Maildir++ tree or a directory of mbox files. Messages that arrive while
/// a folder is written are left out of it; the files are not synced (run `sync`).
pub fn export(
    store: &Store,
    user: &str,
    target: &Path,
    format: Format,
    guards: &Guards<'_>,
    note: &mut dyn FnMut(Note),
) -> Result<Summary> {
    let started = Instant::now();
    if target.exists()
        && (!target.is_dir()
            || std::fs::read_dir(target)
                .with_context(|| format!("{}", target.display()))?
                .next()
                .is_some())
    {
        bail!("{} exists and is not an empty directory", target.display());
    }
    let mut r = Reporter {
        note,
        summary: Summary {
            format: Some(format),
            ..Summary::default()
        },
    };
    let folders = store.list_folders(user);
    let total: u64 = folders
        .iter()
        .filter_map(|f| store.status(user, f).ok())
        .map(|s| s.bytes)
        .sum();
    let result = (|| -> Result<()> {
        let maildir = match format {
            Format::Maildir => Some(
                MaildirWriter::create(target)
                    .with_context(|| format!("creating {}", target.display()))?,
            ),
            Format::Mbox => {
                std::fs::create_dir_all(target)
                    .with_context(|| format!("creating {}", target.display()))?;
                None
            }
        };
        let mut done = 0u64;
        for folder in &folders {
            if guards.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                bail!("cancelled after {} messages", r.summary.messages);
            }
            let view = match store.open_folder(user, folder) {
                Ok(view) => view,
                // Deleted since it was listed.
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e).with_context(|| format!("opening {folder}")),
            };
            match &maildir {
                Some(w) => export_maildir(store, user, folder, &view, w, &mut r, &mut done, total)?,
                None => export_mbox(store, user, folder, &view, target, &mut r, &mut done, total)?,
            }
            r.summary.folders += 1;
        }
        Ok(())
    })();
    r.summary.duration = started.elapsed();
    let s = &r.summary;
    tracing::info!(
        event = "export",
        user,
        target = %target.display(),
        format = format.name(),
        folders = s.folders,
        messages = s.messages,
        bytes = s.bytes,
        problems = s.problems,
        duration = %format!("{:.3}", s.duration.as_secs_f64()),
        result = if result.is_ok() { "ok" } else { "failed" }
    );
    result.map(|()| r.summary)
}

/// Calls `each` with every message of the folder that `view` lists, in UID order, with its
/// index entry and its content as LF.
#[allow(clippy::too_many_arguments)]
fn each_message(
    store: &Store,
    user: &str,
    folder: &str,
    view: &store::FolderView,
    r: &mut Reporter<'_>,
    done: &mut u64,
    total: u64,
    each: &mut dyn FnMut(&store::MessageInfo, &[u8]) -> std::io::Result<()>,
) -> Result<()> {
    let mut infos = view.messages.iter().peekable();
    let mut failed: Option<std::io::Error> = None;
    let mut count = 0u64;
    store
        .read_folder(user, folder, &mut |uid, content| {
            while infos.next_if(|m| m.uid < uid).is_some() {}
            let Some(info) = infos.next_if(|m| m.uid == uid) else {
                // Arrived after the folder was opened.
                return Ok(());
            };
            if let Err(e) = each(info, &to_lf(content)) {
                failed = Some(e);
                return Err(store::StoreError::Invalid("writing failed".into()));
            }
            count += 1;
            *done += content.len() as u64;
            r.summary.messages += 1;
            r.summary.bytes += content.len() as u64;
            if count.is_multiple_of(256) {
                (r.note)(Note::Progress {
                    done: (*done).min(total),
                    total,
                    messages: r.summary.messages,
                });
            }
            Ok(())
        })
        .map_err(|e| match failed.take() {
            Some(io) => anyhow::Error::from(io),
            None => anyhow::Error::from(e),
        })
        .with_context(|| format!("exporting {folder}"))?;
    (r.note)(Note::Progress {
        done: (*done).min(total),
        total,
        messages: r.summary.messages,
    });
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn export_maildir(
    store: &Store,
    user: &str,
    folder: &str,
    view: &store::FolderView,
    writer: &MaildirWriter,
    r: &mut Reporter<'_>,
    done: &mut u64,
    total: u64,
) -> Result<()> {
    let mut out = writer
        .folder(&maildir_levels(folder), view.status.uidvalidity)
        .with_context(|| format!("creating the maildir of {folder}"))?;
    each_message(
        store,
        user,
        folder,
        view,
        r,
        done,
        total,
        &mut |info, content| {
            out.write(&OutMessage {
                uid: info.uid,
                flags: file_flags(info.flags),
                keywords: &info.keywords,
                internal_date: info.internal_date,
                content,
            })
        },
    )?;
    let unwritten = out
        .finish(view.status.uidnext)
        .with_context(|| format!("writing the uidlist of {folder}"))?;
    for k in unwritten {
        r.problem(format!(
            "{folder}: keyword {k:?} not written (a maildir folder has 26 keyword letters)"
        ));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn export_mbox(
    store: &Store,
    user: &str,
    folder: &str,
    view: &store::FolderView,
    root: &Path,
    r: &mut Reporter<'_>,
    done: &mut u64,
    total: u64,
) -> Result<()> {
    let path = mbox_file(root, folder);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let file =
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let mut keywords: Vec<String> = Vec::new();
    for m in &view.messages {
        for k in &m.keywords {
            if !keywords.contains(k) {
                keywords.push(k.clone());
            }
        }
    }
    let base = MboxBase {
        uidvalidity: view.status.uidvalidity,
        uidnext: view.status.uidnext,
        keywords,
    };
    let mut writer = MboxWriter::new(std::io::BufWriter::with_capacity(256 << 10, file));
    each_message(
        store,
        user,
        folder,
        view,
        r,
        done,
        total,
        &mut |info, content| {
            writer.write(
                &MboxOut {
                    sender: &mbox::envelope_sender(content),
                    internal_date: info.internal_date,
                    flags: file_flags(info.flags),
                    keywords: &info.keywords,
                    uid: Some(info.uid),
                    content,
                },
                Some(&base),
            )
        },
    )?;
    use std::io::Write as _;
    writer
        .into_inner()
        .flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

//! The mail log: one line per event, `key=value` pairs (logfmt), so that
//! `grep event=delivered` or any logfmt tool reads it.
//!
//! ```text
//! ts=2026-11-25T14:03:07.118Z level=info event=accepted proto=smtp queue_id=8213 from=<a@b.example> rcpts=1 size=8192 client=192.0.2.7
//! ```
//!
//! - Where: stderr, or `[log] file` (appended to; reopened on SIGHUP, for logrotate).
//! - Level: `RUST_LOG` if set, else `[log] level` (default `info`); other crates' chatter is
//!   kept at `warn` unless `RUST_LOG` asks for it.
//! - Colour (the level only) when writing to a terminal, never in a file.
//! - Lines are appended to a shared buffer that a writer thread empties every
//!   [`FLUSH_INTERVAL`] (or as soon as it holds [`FLUSH_BYTES`]) with one write: a busy server
//!   pays neither a write nor a thread wake-up per line. A buffer at [`BUFFERED_BYTES_MAX`]
//!   makes the logging thread wait rather than drop lines of the mail log.
//! - Values are quoted when they hold a space, `=` or `"`, escaped when they hold control
//!   characters, and cut at [`VALUE_CHARS_MAX`], so what a client sends can neither split a
//!   line nor flood it.

use std::fmt::{self, Write as _};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The longest value written, in characters.
pub(crate) const VALUE_CHARS_MAX: usize = 512;
/// How long a line may wait in the buffer before the writer thread writes it.
const FLUSH_INTERVAL: Duration = Duration::from_millis(100);
/// A buffer this full is written at once, without waiting for the interval.
const FLUSH_BYTES: usize = 256 * 1024;
/// Bytes of lines waiting for the writer thread; past this, logging threads wait for it.
const BUFFERED_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Our crates: their `info` events are the mail log. Everything else starts at `warn`.
const OUR_CRATES: [&str; 16] = [
    "server",
    "filter",
    "admin",
    "imap_client",
    "telemetry",
    "mailboxes",
    "delivery",
    "cluster",
    "web",
    "mailstow",
    "queue",
    "store",
    "directory",
    "sender_auth",
    "acme",
    "transport_policy",
];

/// The running log: keep it alive for as long as lines should be written.
pub(crate) struct Logging {
    reopen: Arc<AtomicBool>,
    /// Sets the filter of `[log] level` (`None` when `RUST_LOG` rules).
    set_filter: Option<Box<dyn Fn(tracing_subscriber::EnvFilter) -> Result<()> + Send + Sync>>,
    _writer: WriterThread,
}

impl Logging {
    /// Asks the writer to reopen the log file before its next line (after logrotate moved it).
    pub(crate) fn reopen(&self) {
        self.reopen.store(true, Ordering::Relaxed);
    }

    /// Applies a new `[log] level` (a reload); `RUST_LOG`, when set, keeps ruling.
    pub(crate) fn set_level(&self, level: &str) -> Result<()> {
        let filter = filter(level)?;
        match &self.set_filter {
            Some(set) => set(filter),
            None => Ok(()),
        }
    }
}

/// The filter for `level` (one of off, error, warn, info, debug, trace): our crates at
/// `level`, others at `warn` (or at `level` when it is quieter than that).
pub(crate) fn filter(level: &str) -> Result<tracing_subscriber::EnvFilter> {
    let parsed: LevelFilter = level.parse().map_err(|_| {
        anyhow::anyhow!("[log] level '{level}': use off, error, warn, info, debug or trace")
    })?;
    let others = parsed.min(LevelFilter::WARN);
    let mut directives = others.to_string().to_lowercase();
    for krate in OUR_CRATES {
        directives.push_str(&format!(",{krate}={}", parsed.to_string().to_lowercase()));
    }
    Ok(tracing_subscriber::EnvFilter::new(directives))
}

/// Starts the log: `file` or stderr, at `level` unless `RUST_LOG` is set.
pub(crate) fn init(level: &str, file: Option<&Path>) -> Result<Logging> {
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|directives| !directives.trim().is_empty());
    let filter = match &from_env {
        Some(directives) => tracing_subscriber::EnvFilter::try_new(directives)
            .with_context(|| format!("RUST_LOG '{directives}'"))?,
        None => filter(level)?,
    };
    let reopen = Arc::new(AtomicBool::new(false));
    let (target, ansi) = match file {
        Some(path) => (Target::file(path, reopen.clone())?, false),
        None => (
            Target::Stderr(BufWriter::new(io::stderr())),
            io::stderr().is_terminal(),
        ),
    };
    let (writer, guard) = WriterThread::start(target)?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .event_format(Logfmt { ansi })
        .with_writer(writer)
        .with_filter_reloading();
    let handle = builder.reload_handle();
    builder
        .try_init()
        .map_err(|e| anyhow::anyhow!("starting the log: {e}"))?;
    let set_filter: Option<Box<dyn Fn(_) -> Result<()> + Send + Sync>> = match from_env {
        Some(_) => None,
        None => Some(Box::new(move |filter| {
            handle
                .reload(filter)
                .map_err(|e| anyhow::anyhow!("changing the log level: {e}"))
        })),
    };
    Ok(Logging {
        reopen,
        set_filter,
        _writer: guard,
    })
}

/// Lines waiting for the writer thread.
struct Pending {
    lines: Vec<u8>,
    /// The log is being stopped: write what is left and end.
    closing: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    /// Wakes the writer thread early (a full buffer, the stop).
    wake: Condvar,
    /// Wakes logging threads waiting for room.
    room: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What `tracing` writes each formatted line to (one `write_all` per line, so a line is never
/// split between batches).
#[derive(Clone)]
struct LineSink(Arc<Shared>);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LineSink {
    type Writer = &'a Shared;

    fn make_writer(&'a self) -> Self::Writer {
        &self.0
    }
}

impl Write for &Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut pending = self.lock();
        while pending.lines.len() >= BUFFERED_BYTES_MAX && !pending.closing {
            pending = self.room.wait(pending).unwrap_or_else(|p| p.into_inner());
        }
        pending.lines.extend_from_slice(buf);
        if pending.lines.len() >= FLUSH_BYTES {
            self.wake.notify_one();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The thread that writes the buffered lines; dropping it writes the last ones and joins it.
struct WriterThread {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WriterThread {
    fn start(mut target: Target) -> Result<(LineSink, WriterThread)> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                lines: Vec::new(),
                closing: false,
            }),
            wake: Condvar::new(),
            room: Condvar::new(),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("log".into())
                .spawn(move || {
                    let mut batch = Vec::new();
                    loop {
                        let closing = {
                            let mut pending = shared.lock();
                            if pending.lines.len() < FLUSH_BYTES && !pending.closing {
                                pending = shared
                                    .wake
                                    .wait_timeout(pending, FLUSH_INTERVAL)
                                    .unwrap_or_else(|p| p.into_inner())
                                    .0;
                            }
                            // Swap buffers: each keeps its capacity for the next batch.
                            std::mem::swap(&mut batch, &mut pending.lines);
                            shared.room.notify_all();
                            pending.closing
                        };
                        if !batch.is_empty() {
                            // Nowhere to report a failed write of the log but stderr.
                            if let Err(e) = target.write_all(&batch).and_then(|()| target.flush()) {
                                eprintln!("mailstow: writing the log: {e}");
                            }
                            batch.clear();
                        }
                        if closing && shared.lock().lines.is_empty() {
                            break;
                        }
                    }
                })
                .context("starting the log's writer thread")?
        };
        Ok((
            LineSink(shared.clone()),
            WriterThread {
                shared,
                thread: Some(thread),
            },
        ))
    }
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
        self.shared.room.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Where the writer thread writes, buffered: one `write` per batch of lines.
enum Target {
    Stderr(BufWriter<io::Stderr>),
    File {
        path: PathBuf,
        file: BufWriter<File>,
        reopen: Arc<AtomicBool>,
    },
}

impl Target {
    fn file(path: &Path, reopen: Arc<AtomicBool>) -> Result<Target> {
        Ok(Target::File {
            file: BufWriter::new(open_log(path)?),
            path: path.to_path_buf(),
            reopen,
        })
    }
}

fn open_log(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening the log file {}", path.display()))
}

impl Write for Target {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Target::Stderr(stderr) => stderr.write(buf),
            Target::File { path, file, reopen } => {
                if reopen.swap(false, Ordering::Relaxed) {
                    file.flush()?;
                    match open_log(path) {
                        Ok(new) => *file = BufWriter::new(new),
                        // Keep writing where we were rather than lose the lines.
                        Err(e) => eprintln!("mailstow: {e:#}"),
                    }
                }
                file.write(buf)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Target::Stderr(stderr) => stderr.flush(),
            Target::File { file, .. } => file.flush(),
        }
    }
}

/// The logfmt line format.
struct Logfmt {
    ansi: bool,
}

impl<S, N> FormatEvent<S, N> for Logfmt
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let level = match *meta.level() {
            Level::ERROR => "error",
            Level::WARN => "warn",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        writer.write_str("ts=")?;
        write_timestamp(&mut writer, SystemTime::now())?;
        writer.write_str(" level=")?;
        if self.ansi {
            let colour = match *meta.level() {
                Level::ERROR => "31",
                Level::WARN => "33",
                Level::INFO => "32",
                _ => "2",
            };
            write!(writer, "\x1b[{colour}m{level}\x1b[0m")?;
        } else {
            writer.write_str(level)?;
        }
        let krate = meta.target().split("::").next().unwrap_or_default();
        if !OUR_CRATES.contains(&krate) {
            writer.write_str(" target=")?;
            write_value(&mut writer, meta.target())?;
        }
        let mut fields = Fields {
            writer: &mut writer,
            result: Ok(()),
        };
        event.record(&mut fields);
        fields.result?;
        writeln!(writer)
    }
}

/// Writes each field as ` key=value`; the message as `msg=`.
struct Fields<'w, 'a> {
    writer: &'w mut Writer<'a>,
    result: fmt::Result,
}

impl Visit for Fields<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.result.is_ok() {
            self.result = write_field(self.writer, field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_ok() {
            // One scratch string per thread: a line is written without allocating.
            SCRATCH.with_borrow_mut(|text| {
                text.clear();
                let _ = write!(text, "{value:?}");
                self.result = write_field(self.writer, field.name(), text);
                if text.capacity() > VALUE_CHARS_MAX * 4 {
                    *text = String::new();
                }
            });
        }
    }
}

fn write_field(writer: &mut Writer<'_>, name: &str, value: &str) -> fmt::Result {
    let name = if name == "message" { "msg" } else { name };
    write!(writer, " {name}=")?;
    write_value(writer, value)
}

/// A value as logfmt wants it: bare when it can be, else quoted with `\"`, `\\` and control
/// characters escaped; at most [`VALUE_CHARS_MAX`] characters of it.
fn write_value(writer: &mut impl fmt::Write, value: &str) -> fmt::Result {
    let long = value.chars().nth(VALUE_CHARS_MAX).is_some();
    let bare = !value.is_empty()
        && !long
        && value
            .chars()
            .all(|c| !c.is_control() && !matches!(c, ' ' | '=' | '"' | '\\'));
    if bare {
        return writer.write_str(value);
    }
    writer.write_char('"')?;
    for c in value.chars().take(VALUE_CHARS_MAX) {
        match c {
            '"' => writer.write_str("\\\"")?,
            '\\' => writer.write_str("\\\\")?,
            '\n' => writer.write_str("\\n")?,
            '\r' => writer.write_str("\\r")?,
            '\t' => writer.write_str("\\t")?,
            c if c.is_control() => write!(writer, "\\x{:02x}", u32::from(c))?,
            c => writer.write_char(c)?,
        }
    }
    if long {
        writer.write_char('…')?;
    }
    writer.write_char('"')
}

thread_local! {
    static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    /// The second last formatted on this thread and its text up to the seconds.
    static SECOND: std::cell::RefCell<(u64, String)> =
        const { std::cell::RefCell::new((u64::MAX, String::new())) };
}

/// `time` as RFC 3339 in UTC with milliseconds, formatting the date and time only when the
/// second changes.
fn write_timestamp(writer: &mut impl fmt::Write, time: SystemTime) -> fmt::Result {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    SECOND.with_borrow_mut(|(second, text)| {
        if *second != since.as_secs() {
            *second = since.as_secs();
            *text = chrono::DateTime::<chrono::Utc>::from(time)
                .format("%Y-%m-%dT%H:%M:%S")
                .to_string();
        }
        write!(writer, "{text}.{:03}Z", since.subsec_millis())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `time` as RFC 3339 in UTC with milliseconds.
    fn rfc3339_ms(time: SystemTime) -> String {
        chrono::DateTime::<chrono::Utc>::from(time)
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string()
    }

    fn value(v: &str) -> String {
        let mut out = String::new();
        write_value(&mut out, v).unwrap();
        out
    }

    #[test]
    fn values_stay_on_one_line_and_parse_back() {
        assert_eq!(value("plain"), "plain");
        assert_eq!(value("<a@b.example>"), "<a@b.example>");
        assert_eq!(value(""), "\"\"");
        assert_eq!(value("two words"), "\"two words\"");
        assert_eq!(value("a=b"), "\"a=b\"");
        assert_eq!(value("say \"hi\"\r\n"), "\"say \\\"hi\\\"\\r\\n\"");
        assert_eq!(value("\u{7}"), "\"\\x07\"");
        let long = value(&"x".repeat(VALUE_CHARS_MAX + 10));
        assert_eq!(long.chars().count(), VALUE_CHARS_MAX + 3);
    }

    #[test]
    fn timestamps_and_dates() {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_764_079_387_118);
        assert_eq!(rfc3339_ms(t), "2025-11-25T14:03:07.118Z");
        assert_eq!(rfc3339_ms(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + std::time::Duration::from_secs(11_016 * 86_400 + 86_399);
        assert_eq!(rfc3339_ms(leap), "2000-02-29T23:59:59.000Z");
        // The cached second gives the same text, and moves on with the clock.
        let mut cached = String::new();
        for time in [t, t + std::time::Duration::from_millis(1), leap, t] {
            cached.clear();
            write_timestamp(&mut cached, time).unwrap();
            assert_eq!(cached, rfc3339_ms(time));
        }
    }

    #[test]
    fn the_level_filter_keeps_other_crates_at_warn() {
        let directives = |level| {
            let text = filter(level).unwrap().to_string();
            text.split(',').map(str::to_string).collect::<Vec<_>>()
        };
        let info = directives("info");
        assert!(info.iter().any(|d| d == "warn"), "{info:?}");
        assert!(info.iter().any(|d| d == "server=info"), "{info:?}");
        let error = directives("error");
        assert!(error.iter().any(|d| d == "error"), "{error:?}");
        assert!(!error.iter().any(|d| d == "warn"), "{error:?}");
        let off = directives("off");
        assert!(off.iter().any(|d| d == "off"), "{off:?}");
        assert!(off.iter().any(|d| d == "server=off"), "{off:?}");
        assert!(filter("loud").is_err());
    }
}

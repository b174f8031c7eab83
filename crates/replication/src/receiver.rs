//! The partner's side: accepts an owner's stream and applies it, in order, under
//! `<replicas>/<owner node>/` (docs/replication.md, "The stream", R1, R3, R4).

use std::collections::{HashMap, HashSet};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use disk::{Disk, File};

use crate::mirror::lock;
use crate::stream::{CONNECT_TIMEOUT, RECEIVE_IDLE_MAX, hello_mac, same_mac, welcome_mac};
use crate::wire::{self, Frame, Op};

/// Who may stream here: the server's rules (a known node whose partner this node is, at an
/// epoch not below the directory's, not a node this node serves itself).
pub trait Admission: Send + Sync + 'static {
    fn admit(&self, node: &str, epoch: u64) -> Result<(), String>;
}

#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    pub key: [u8; 32],
    /// `<data_dir>/replicas`: each owner's copy in a directory named after it.
    pub root: PathBuf,
    /// Streams at once (`replication_streams_max`); more are closed at once.
    pub streams_max: usize,
    /// This node's own files, when it is the standby of itself (its own machine back after a
    /// take-over): a stream of `own.0` lands in `own.1` instead of `root`.
    pub own: Option<(String, PathBuf)>,
    /// What a full copy may remove in a copy's directory: the owner's copy roots (the same
    /// as `MirrorConfig::copy_roots`); anything else there is left alone.
    pub copy_roots: Vec<String>,
}

impl ReceiverConfig {
    pub fn new(key: [u8; 32], root: PathBuf) -> ReceiverConfig {
        ReceiverConfig {
            key,
            root,
            streams_max: 16,
            own: None,
            copy_roots: vec!["queue".into(), "store".into(), "cluster-delivered".into()],
        }
    }

    /// Where `node`'s copy lives, and its stored position.
    fn place(&self, node: &str) -> (PathBuf, PathBuf) {
        match &self.own {
            Some((own, dir)) if own == node => (dir.clone(), dir.join("standby.state")),
            _ => (
                self.root.join(node),
                self.root.join(format!("{node}.state")),
            ),
        }
    }
}

/// The longest frame accepted before the owner is authenticated (its `Hello`).
const HELLO_BYTES_MAX: usize = 1024;
/// The replica writes its position (after syncing what it applied) at most this often.
const STATE_INTERVAL: Duration = Duration::from_secs(1);
const STATE_MAGIC: &[u8; 8] = b"MSTWRPL1";
const STATE_BYTES: usize = 8 + 16 + 8 + 8 + 8;

/// The listening side; stops when dropped or [`Receiver::stop`]ped.
pub struct Receiver {
    address: std::net::SocketAddr,
    shared: Arc<ReceiverShared>,
}

struct ReceiverShared {
    config: ReceiverConfig,
    disk: Arc<dyn Disk>,
    admission: Arc<dyn Admission>,
    stopping: AtomicBool,
    streams: AtomicUsize,
    /// Per owner node: the live connection (so a newer one can end it) and the lock that
    /// keeps two connections of one owner from applying at once.
    owners: Mutex<HashMap<String, Owner>>,
}

#[derive(Clone)]
struct Owner {
    applying: Arc<Mutex<()>>,
    connection: Option<Arc<TcpStream>>,
}

/// A replica's stored position for one owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Position {
    session: u128,
    /// Every entry up to this seq is applied and synced.
    applied: u64,
    /// The highest epoch accepted from the owner (R4).
    epoch: u64,
}

impl Receiver {
    /// Starts accepting on `listener`.
    pub fn start(
        listener: TcpListener,
        config: ReceiverConfig,
        disk: Arc<dyn Disk>,
        admission: Arc<dyn Admission>,
    ) -> io::Result<Receiver> {
        disk.create_dir_all(&config.root)?;
        let address = listener.local_addr()?;
        let shared = Arc::new(ReceiverShared {
            config,
            disk,
            admission,
            stopping: AtomicBool::new(false),
            streams: AtomicUsize::new(0),
            owners: Mutex::new(HashMap::new()),
        });
        let accepting = shared.clone();
        std::thread::Builder::new()
            .name("replica-listener".into())
            .spawn(move || accept_loop(accepting, listener))?;
        Ok(Receiver { address, shared })
    }

    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.address
    }

    /// Where the copy of `node` lives.
    pub fn copy_dir(&self, node: &str) -> PathBuf {
        self.shared.config.place(node).0
    }

    /// Ends the stream of `node`, if any, and waits until nothing of it is being applied
    /// (before this node opens the copy itself: failover).
    pub fn close(&self, node: &str) {
        let owner = lock(&self.shared.owners).get(node).cloned();
        if let Some(owner) = owner {
            if let Some(c) = &owner.connection {
                let _ = c.shutdown(Shutdown::Both);
            }
            drop(lock(&owner.applying));
        }
    }

    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the accept call.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_millis(200));
        let owners: Vec<Owner> = lock(&self.shared.owners).values().cloned().collect();
        for owner in owners {
            if let Some(c) = &owner.connection {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(shared: Arc<ReceiverShared>, listener: TcpListener) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        if shared.streams.fetch_add(1, Ordering::SeqCst) >= shared.config.streams_max {
            shared.streams.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(
                event = "replica_stream_refused",
                reason = "replication_streams_max"
            );
            continue;
        }
        let worker = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("replica-apply".into())
            .spawn(move || {
                let peer = stream.peer_addr().ok();
                if let Err(e) = serve(&worker, stream) {
                    tracing::info!(
                        event = "replica_stream_ended",
                        client = ?peer,
                        error = %e
                    );
                }
                worker.streams.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.streams.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn read_frame(reader: &mut impl Read, max: usize) -> io::Result<Frame> {
    let mut prefix = [0u8; 4];
    reader.read_exact(&mut prefix)?;
    let len = wire::body_len(prefix).map_err(io::Error::other)?;
    if len > max {
        return Err(io::Error::other(format!("a frame of {len} bytes here")));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body)?;
    wire::decode(&body).map_err(io::Error::other)
}

fn send(writer: &mut impl Write, frame: &Frame) -> io::Result<()> {
    let mut out = Vec::new();
    wire::encode(frame, &mut out);
    writer.write_all(&out)
}

/// One owner's connection: handshake, then apply until it ends.
fn serve(shared: &ReceiverShared, stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    // The whole handshake within CONNECT_TIMEOUT: a silent client costs one thread that long.
    stream.set_read_timeout(Some(CONNECT_TIMEOUT))?;
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let stream = Arc::new(stream);
    let mut reader = BufReader::with_capacity(1 << 20, stream.try_clone()?);
    let mut writer = BufWriter::new(stream.try_clone()?);
    let nonce: [u8; 16] = rand::random();
    send(&mut writer, &Frame::Greeting { nonce })?;
    writer.flush()?;
    let Frame::Hello {
        node,
        epoch,
        session,
        mac,
    } = read_frame(&mut reader, HELLO_BYTES_MAX)?
    else {
        return Err(io::Error::other("no Hello"));
    };
    if Instant::now() > deadline {
        return Err(io::Error::other("the handshake took too long"));
    }
    if !same_mac(
        &mac,
        &hello_mac(&shared.config.key, &node, epoch, session, &nonce),
    ) {
        return Err(io::Error::other("a Hello with a wrong MAC"));
    }
    wire::check_path(&node).map_err(io::Error::other)?;
    if node.contains('/') {
        return Err(io::Error::other("a node name with '/'"));
    }
    let refuse = |writer: &mut BufWriter<TcpStream>, reason: String| -> io::Result<()> {
        send(
            writer,
            &Frame::Refuse {
                reason: reason.clone(),
            },
        )?;
        writer.flush()?;
        Err(io::Error::other(format!("refused {node}: {reason}")))
    };
    if let Err(reason) = shared.admission.admit(&node, epoch) {
        return refuse(&mut writer, reason);
    }
    // One connection per owner: a newer one ends the older (probably dead) one.
    let owner = {
        let mut owners = lock(&shared.owners);
        let owner = owners.entry(node.clone()).or_insert_with(|| Owner {
            applying: Arc::new(Mutex::new(())),
            connection: None,
        });
        if let Some(old) = owner.connection.replace(stream.clone()) {
            let _ = old.shutdown(Shutdown::Both);
        }
        owner.clone()
    };
    let _applying = lock(&owner.applying);
    let (dir, state_path) = shared.config.place(&node);
    let mut position = read_position(&*shared.disk, &state_path);
    if epoch < position.epoch {
        return refuse(
            &mut writer,
            format!("stale epoch {epoch} (this replica has {})", position.epoch),
        );
    }
    position.epoch = epoch;
    let applied = if position.session == session {
        position.applied
    } else {
        0
    };
    let welcome = welcome_mac(&shared.config.key, &mac, position.session, applied);
    send(
        &mut writer,
        &Frame::Welcome {
            session: position.session,
            applied,
            mac: welcome,
        },
    )?;
    writer.flush()?;
    stream.set_read_timeout(Some(RECEIVE_IDLE_MAX))?;
    let mut copy = Copy {
        disk: shared.disk.clone(),
        dir,
        roots: shared.config.copy_roots.clone(),
        files: HashMap::new(),
        dirty: HashSet::new(),
    };
    let mut last = applied;
    let mut acked = applied;
    let mut stored = Instant::now();
    let result = (|| -> io::Result<()> {
        loop {
            if shared.stopping.load(Ordering::SeqCst) {
                return Ok(());
            }
            let frame = read_frame(&mut reader, wire::FRAME_BYTES_MAX)?;
            let seq = match frame {
                Frame::Ack { seq: 0 } => None, // the owner's heartbeat
                Frame::Op { seq, op } => {
                    expect_next(&mut last, seq)?;
                    copy.apply(&op)?;
                    Some(seq)
                }
                Frame::CopyStart { seq, files } => {
                    // A copy may start at any seq after the last (the owner dropped what
                    // came before: the copy carries it).
                    if seq <= last && last != 0 {
                        return Err(io::Error::other(format!("CopyStart {seq} after {last}")));
                    }
                    last = seq;
                    copy.start(&files)?;
                    tracing::info!(event = "replica_copy_start", node = %node, files = files.len());
                    Some(seq)
                }
                Frame::CopyDone { seq } => {
                    expect_next(&mut last, seq)?;
                    copy.sync_all()?;
                    tracing::info!(event = "replica_copy_done", node = %node);
                    Some(seq)
                }
                other => return Err(io::Error::other(format!("unexpected {other:?}"))),
            };
            // About to wait for more: acknowledge what is applied (syncs included, in order).
            if reader.buffer().is_empty() && last > acked {
                send(&mut writer, &Frame::Ack { seq: last })?;
                writer.flush()?;
                acked = last;
            }
            if seq.is_some() && stored.elapsed() >= STATE_INTERVAL {
                // R3: the stored position never claims more than is synced.
                copy.sync_all()?;
                position = Position {
                    session,
                    applied: last,
                    epoch,
                };
                write_position(&*shared.disk, &state_path, &position)?;
                stored = Instant::now();
            }
        }
    })();
    // Whatever happened, keep what is applied as the position if it can be synced.
    if copy.sync_all().is_ok() {
        let _ = write_position(
            &*shared.disk,
            &state_path,
            &Position {
                session,
                applied: last,
                epoch,
            },
        );
    }
    {
        let mut owners = lock(&shared.owners);
        if let Some(o) = owners.get_mut(&node)
            && o.connection
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, &stream))
        {
            o.connection = None;
        }
    }
    // A read of a closed connection ends the stream normally.
    match result {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(()),
        other => other,
    }
}

fn expect_next(last: &mut u64, seq: u64) -> io::Result<()> {
    // After a resume the owner may send again entries this replica has (its position lagged).
    if seq != *last + 1 {
        return Err(io::Error::other(format!(
            "entry {seq} after {last}: the stream skipped"
        )));
    }
    *last = seq;
    Ok(())
}

/// One owner's files here.
struct Copy {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    roots: Vec<String>,
    files: HashMap<String, Arc<dyn File>>,
    /// Written since their last sync.
    dirty: HashSet<String>,
}

fn absent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

impl Copy {
    fn file(&mut self, rel: &str, create: bool) -> io::Result<Arc<dyn File>> {
        if let Some(f) = self.files.get(rel) {
            return Ok(f.clone());
        }
        let path = self.dir.join(rel);
        if create && let Some(parent) = path.parent() {
            self.disk.create_dir_all(parent)?;
        }
        let file = self.disk.open(&path, create)?;
        if self.files.len() >= 1024 {
            self.files.clear();
        }
        self.files.insert(rel.to_string(), file.clone());
        Ok(file)
    }

    fn apply(&mut self, op: &Op) -> io::Result<()> {
        match op {
            Op::Write {
                path,
                offset,
                bytes,
            } => {
                self.file(path, true)?.write_all_at(bytes, *offset)?;
                self.dirty.insert(path.clone());
            }
            Op::Zeros { path, offset, len } => {
                self.file(path, true)?.write_zeros(*offset, *len)?;
                self.dirty.insert(path.clone());
            }
            Op::SetLen { path, len } => {
                self.file(path, true)?.set_len(*len)?;
                self.dirty.insert(path.clone());
            }
            Op::Allocate { path, len } => {
                self.file(path, true)?.allocate(*len)?;
                self.dirty.insert(path.clone());
            }
            Op::Sync { path } => match self.file(path, false) {
                Ok(f) => {
                    f.sync_data()?;
                    self.dirty.remove(path);
                }
                Err(e) if absent(&e) => {}
                Err(e) => return Err(e),
            },
            Op::Create { path } => {
                self.file(path, true)?;
            }
            Op::CreateDirAll { path } => self.disk.create_dir_all(&self.dir.join(path))?,
            Op::Rename { from, to } => {
                self.files.remove(from);
                self.files.remove(to);
                match self.disk.rename(&self.dir.join(from), &self.dir.join(to)) {
                    Ok(()) => {
                        if self.dirty.remove(from) {
                            self.dirty.insert(to.clone());
                        }
                    }
                    // Applied again after a resume: it happened already.
                    Err(e) if absent(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            Op::Remove { path } => {
                self.files.remove(path);
                self.dirty.remove(path);
                match self.disk.remove(&self.dir.join(path)) {
                    Err(e) if !absent(&e) => return Err(e),
                    _ => {}
                }
            }
            Op::SyncDir { path } => match self.disk.sync_dir(&self.dir.join(path)) {
                Err(e) if !absent(&e) => return Err(e),
                _ => {}
            },
        }
        Ok(())
    }

    /// A full copy starts: the files listed get their lengths, every other file goes.
    fn start(&mut self, files: &[(String, u64)]) -> io::Result<()> {
        self.files.clear();
        let listed: HashMap<&str, u64> = files.iter().map(|(p, l)| (p.as_str(), *l)).collect();
        for rel in walk(&self.dir, &self.roots)? {
            if !listed.contains_key(rel.as_str()) {
                self.disk.remove(&self.dir.join(&rel))?;
                self.dirty.remove(&rel);
            }
        }
        for (rel, len) in files {
            self.file(rel, true)?.set_len(*len)?;
            self.dirty.insert(rel.clone());
        }
        Ok(())
    }

    /// Syncs every file written since its last sync, and the directories.
    fn sync_all(&mut self) -> io::Result<()> {
        let mut dirs = HashSet::new();
        for rel in std::mem::take(&mut self.dirty) {
            match self.file(&rel, false) {
                Ok(f) => f.sync_data()?,
                Err(e) if absent(&e) => {}
                Err(e) => return Err(e),
            }
            if let Some(parent) = Path::new(&rel).parent() {
                dirs.insert(self.dir.join(parent));
            }
        }
        dirs.insert(self.dir.clone());
        for dir in dirs {
            match self.disk.sync_dir(&dir) {
                Err(e) if !absent(&e) => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Every file of the copy roots under `dir`, as paths relative to it (one level of
/// subdirectories: the engines' directories hold files only).
fn walk(dir: &Path, roots: &[String]) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if absent(&e) => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !roots.contains(&name) {
            continue;
        }
        if entry.file_type()?.is_dir() {
            for inner in std::fs::read_dir(entry.path())? {
                let inner = inner?;
                if inner.file_type()?.is_file() {
                    out.push(format!("{name}/{}", inner.file_name().to_string_lossy()));
                }
            }
        } else {
            out.push(name);
        }
    }
    Ok(out)
}

fn read_position(disk: &dyn Disk, path: &Path) -> Position {
    let Ok(file) = disk.open(path, false) else {
        return Position::default();
    };
    let mut buf = [0u8; STATE_BYTES];
    if file.read_exact_at(&mut buf, 0).is_err() || &buf[..8] != STATE_MAGIC {
        return Position::default();
    }
    let sum = blake3::hash(&buf[..STATE_BYTES - 8]);
    if buf[STATE_BYTES - 8..] != sum.as_bytes()[..8] {
        // Torn: nothing can be resumed, a full copy follows.
        return Position::default();
    }
    Position {
        session: u128::from_le_bytes(buf[8..24].try_into().expect("16 bytes")),
        applied: u64::from_le_bytes(buf[24..32].try_into().expect("8 bytes")),
        epoch: u64::from_le_bytes(buf[32..40].try_into().expect("8 bytes")),
    }
}

fn write_position(disk: &dyn Disk, path: &Path, p: &Position) -> io::Result<()> {
    let mut buf = Vec::with_capacity(STATE_BYTES);
    buf.extend_from_slice(STATE_MAGIC);
    buf.extend_from_slice(&p.session.to_le_bytes());
    buf.extend_from_slice(&p.applied.to_le_bytes());
    buf.extend_from_slice(&p.epoch.to_le_bytes());
    let sum = blake3::hash(&buf);
    buf.extend_from_slice(&sum.as_bytes()[..8]);
    let file = disk.open(path, true)?;
    file.write_all_at(&buf, 0)?;
    file.sync_data()
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("address", &self.address)
            .finish()
    }
}

//! The owner's connection to its partner: handshake, resume from the backlog or a full copy,
//! the stream, the acks, and the way back into sync (docs/replication.md, "The stream").

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::mirror::{Entry, Partner, Phase, Shared, State, lock};
use crate::stream::{
    CONNECT_TIMEOUT, COPY_CHUNK_BYTES, HEARTBEAT, RECEIVE_IDLE_MAX, RECONNECT_PAUSE, hello_mac,
    same_mac, welcome_mac,
};
use crate::wire::{self, Frame, Op};

/// Entries written to the socket in one go at most (then the state is looked at again).
const SEND_BATCH_BYTES_MAX: usize = 4 << 20;

/// The sender thread: connects to whoever the partner is, streams, reconnects.
pub(crate) fn run(shared: Arc<Shared>) {
    loop {
        let (partner, generation) = {
            let mut st = shared.state();
            loop {
                if st.stopping {
                    return;
                }
                if let Some(p) = &st.partner {
                    break (p.clone(), st.partner_generation);
                }
                st = shared.changed.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        };
        match connect(&shared, &partner) {
            Ok(stream) => {
                if let Err(e) = stream_to(&shared, &partner, generation, stream) {
                    tracing::warn!(
                        event = "replica_stream_error",
                        node = %shared.config.node,
                        replica = %partner.name,
                        error = %e
                    );
                }
            }
            Err(e) => tracing::debug!(
                event = "replica_connect_error",
                node = %shared.config.node,
                replica = %partner.name,
                error = %e
            ),
        }
        {
            let mut st = shared.state();
            if st.phase == Phase::InSync || st.phase == Phase::CatchingUp {
                shared.leave_sync(&mut st, "the connection to the replica ended");
            }
        }
        std::thread::sleep(RECONNECT_PAUSE);
    }
}

fn connect(shared: &Shared, partner: &Partner) -> io::Result<TcpStream> {
    let address = partner
        .address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other(format!("{} resolves to nothing", partner.address)))?;
    let stream = TcpStream::connect_timeout(&address, CONNECT_TIMEOUT)?;
    stream.set_nodelay(true)?;
    let _ = shared;
    Ok(stream)
}

fn read_frame(reader: &mut impl Read) -> io::Result<Frame> {
    let mut prefix = [0u8; 4];
    reader.read_exact(&mut prefix)?;
    let len = wire::body_len(prefix).map_err(io::Error::other)?;
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body)?;
    wire::decode(&body).map_err(io::Error::other)
}

fn write_frame(writer: &mut impl Write, frame: &Frame) -> io::Result<()> {
    let mut out = Vec::new();
    wire::encode(frame, &mut out);
    writer.write_all(&out)
}

/// One connection's life.
fn stream_to(
    shared: &Arc<Shared>,
    partner: &Partner,
    generation: u64,
    stream: TcpStream,
) -> io::Result<()> {
    stream.set_read_timeout(Some(CONNECT_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::with_capacity(256 << 10, stream.try_clone()?);
    let Frame::Greeting { nonce } = read_frame(&mut reader)? else {
        return Err(io::Error::other("the replica did not greet"));
    };
    let epoch = shared.state().epoch;
    let mac = hello_mac(
        &shared.config.key,
        &shared.config.node,
        epoch,
        shared.session,
        &nonce,
    );
    write_frame(
        &mut writer,
        &Frame::Hello {
            node: shared.config.node.clone(),
            epoch,
            session: shared.session,
            mac,
        },
    )?;
    writer.flush()?;
    let applied = match read_frame(&mut reader)? {
        Frame::Welcome {
            session,
            applied,
            mac: theirs,
        } => {
            if !same_mac(
                &theirs,
                &welcome_mac(&shared.config.key, &mac, session, applied),
            ) {
                return Err(io::Error::other("the replica's welcome has a wrong MAC"));
            }
            (session == shared.session).then_some(applied)
        }
        Frame::Refuse { reason } => {
            return Err(io::Error::other(format!("the replica refused: {reason}")));
        }
        other => return Err(io::Error::other(format!("unexpected {other:?}"))),
    };
    // Decide under the lock: resume from the backlog, or copy everything.
    let (mut sent, mut copy) = {
        let mut st = shared.state();
        if st.partner_generation != generation {
            return Ok(());
        }
        match applied.filter(|&a| can_resume(&st, a)) {
            Some(applied) => {
                st.acked = st.acked.max(applied);
                st.catch_up_target = Some(st.next_seq - 1);
                st.phase = Phase::CatchingUp;
                tracing::info!(
                    event = "replica_resume",
                    node = %shared.config.node,
                    replica = %partner.name,
                    from_seq = applied + 1,
                    to_seq = st.next_seq - 1
                );
                (applied, None)
            }
            None => {
                let job = CopyJob::start(shared, &mut st)?;
                tracing::info!(
                    event = "replica_copy",
                    node = %shared.config.node,
                    replica = %partner.name,
                    files = job.files.len(),
                    bytes = job.files.iter().map(|(_, l)| l).sum::<u64>(),
                    msg = "copying every file to the replica"
                );
                (job.start_seq - 1, Some(job))
            }
        }
    };
    shared.changed.notify_all();
    stream.set_read_timeout(Some(RECEIVE_IDLE_MAX))?;
    let broken = Arc::new(AtomicBool::new(false));
    let acks = {
        let shared = shared.clone();
        let broken = broken.clone();
        let node = partner.name.clone();
        std::thread::Builder::new()
            .name("replica-acks".into())
            .spawn(move || {
                if let Err(e) = read_acks(&shared, reader) {
                    tracing::debug!(event = "replica_ack_error", replica = %node, error = %e);
                }
                broken.store(true, Ordering::SeqCst);
                shared.changed.notify_all();
            })?
    };
    let result = send_loop(
        shared,
        generation,
        &broken,
        &mut writer,
        &mut sent,
        &mut copy,
    );
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = acks.join();
    result
}

/// Whether the backlog holds every entry after `applied`.
fn can_resume(st: &State, applied: u64) -> bool {
    if st.lost || applied >= st.next_seq {
        return false;
    }
    match st.backlog.front() {
        Some((first, _)) => *first <= applied + 1,
        None => applied + 1 == st.next_seq,
    }
}

/// Reads the replica's acks until the connection ends.
fn read_acks(shared: &Shared, mut reader: BufReader<TcpStream>) -> io::Result<()> {
    loop {
        match read_frame(&mut reader)? {
            Frame::Ack { seq } => {
                let mut st = shared.state();
                // An ack at or below what is already acknowledged is a resumed replica
                // applying again what its stored position lagged behind: nothing new.
                if seq >= st.next_seq {
                    return Err(io::Error::other(format!(
                        "the replica acknowledged {seq}, never sent"
                    )));
                }
                if seq > st.acked {
                    st.acked = seq;
                    st.oldest_unacked = if st.acked + 1 < st.next_seq {
                        Some(Instant::now())
                    } else {
                        None
                    };
                }
                shared.changed.notify_all();
            }
            Frame::Refuse { reason } => {
                tracing::warn!(event = "replica_refused", node = %shared.config.node, reason = %reason);
                return Ok(());
            }
            other => return Err(io::Error::other(format!("unexpected {other:?}"))),
        }
    }
}

/// Streams entries, the copy's chunks in between, until the connection breaks.
fn send_loop(
    shared: &Shared,
    generation: u64,
    broken: &AtomicBool,
    writer: &mut BufWriter<TcpStream>,
    sent: &mut u64,
    copy: &mut Option<CopyJob>,
) -> io::Result<()> {
    let mut last_write = Instant::now();
    loop {
        let batch = {
            let mut st = shared.state();
            loop {
                if st.stopping || st.partner_generation != generation {
                    return Ok(());
                }
                if broken.load(Ordering::SeqCst) {
                    return Err(io::Error::other("the replica closed the stream"));
                }
                if st.lost {
                    return Err(io::Error::other(
                        "the backlog overflowed: the replica needs a full copy",
                    ));
                }
                if matches!(st.fence, crate::mirror::Fence::TakenOver(_)) {
                    return Ok(());
                }
                back_in_sync(shared, &mut st);
                if st.phase == Phase::InSync
                    && st.acked < *sent
                    && st
                        .oldest_unacked
                        .is_some_and(|t| t.elapsed() > RECEIVE_IDLE_MAX)
                {
                    return Err(io::Error::other("the replica stopped acknowledging"));
                }
                let batch = unsent(&st, *sent);
                if !batch.is_empty() {
                    break batch;
                }
                if copy.is_some() && st.backlog_bytes < shared.config.backlog_bytes_max / 2 {
                    break Vec::new();
                }
                let waited = shared
                    .changed
                    .wait_timeout(st, HEARTBEAT)
                    .unwrap_or_else(|p| p.into_inner());
                st = waited.0;
                if waited.1.timed_out() && last_write.elapsed() >= HEARTBEAT {
                    drop(st);
                    write_frame(writer, &Frame::Ack { seq: 0 })?;
                    writer.flush()?;
                    last_write = Instant::now();
                    st = shared.state();
                }
            }
        };
        if batch.is_empty() {
            // Nothing live to send: one more chunk of the copy.
            if let Some(job) = copy
                && job.next_chunk(shared)?
            {
                *copy = None;
            }
            continue;
        }
        let mut out = Vec::new();
        for (seq, entry) in &batch {
            out.clear();
            let frame = match &**entry {
                Entry::Op(op) => Frame::Op {
                    seq: *seq,
                    op: op.clone(),
                },
                Entry::CopyStart(files) => Frame::CopyStart {
                    seq: *seq,
                    files: files.clone(),
                },
                Entry::CopyDone => Frame::CopyDone { seq: *seq },
            };
            wire::encode(&frame, &mut out);
            writer.write_all(&out)?;
            *sent = *seq;
        }
        writer.flush()?;
        last_write = Instant::now();
    }
}

/// Entries after `sent`, at most [`SEND_BATCH_BYTES_MAX`] of them.
fn unsent(st: &State, sent: u64) -> Vec<(u64, Arc<Entry>)> {
    let Some((first, _)) = st.backlog.front() else {
        return Vec::new();
    };
    let skip = (sent + 1).saturating_sub(*first) as usize;
    let mut bytes = 0;
    st.backlog
        .iter()
        .skip(skip)
        .take_while(|(_, e)| {
            let go = bytes < SEND_BATCH_BYTES_MAX;
            bytes += match &**e {
                Entry::Op(Op::Write { bytes, .. }) => bytes.len(),
                _ => 64,
            };
            go
        })
        .cloned()
        .collect()
}

/// CatchingUp or Behind with everything up to the target acknowledged: InSync again; the
/// directory names the partner once what was queued at that moment is acknowledged too.
fn back_in_sync(shared: &Shared, st: &mut State) {
    if let (Phase::CatchingUp | Phase::Behind, Some(target)) = (st.phase, st.catch_up_target)
        && !st.lost
        && st.acked >= target
    {
        st.phase = Phase::InSync;
        st.catch_up_target = None;
        st.record_after = Some(st.next_seq - 1);
        shared.changed.notify_all();
    }
    if let (Phase::InSync, Some(after)) = (st.phase, st.record_after)
        && st.acked >= after
    {
        st.record_after = None;
        st.to_record = st.partner.as_ref().map(|p| Some(p.name.clone()));
        shared.changed.notify_all();
    }
}

/// A full copy in progress: the files listed at its start, and where it is.
struct CopyJob {
    start_seq: u64,
    files: Vec<(String, u64)>,
    file: usize,
    offset: u64,
    started: Instant,
    bytes: u64,
}

impl CopyJob {
    /// Lists the files and queues `CopyStart`, dropping the backlog: from here on the copy
    /// and the live entries after it are all the partner needs.
    fn start(shared: &Shared, st: &mut State) -> io::Result<CopyJob> {
        let root = &shared.config.root;
        let mut files = Vec::new();
        for name in &shared.config.copy_roots {
            let path = root.join(name);
            if path.is_dir() {
                for file in shared.inner.list(&path)? {
                    let rel = format!("{name}/{file}");
                    let len = shared.inner.open(&root.join(&rel), false)?.len()?;
                    files.push((rel, len));
                }
            } else if shared.inner.exists(&path) {
                files.push((name.clone(), shared.inner.open(&path, false)?.len()?));
            }
        }
        st.backlog.clear();
        st.backlog_bytes = 0;
        st.lost = false;
        st.phase = Phase::CatchingUp;
        st.catch_up_target = None;
        st.record_after = None;
        let start_seq = shared.push(st, Entry::CopyStart(files.clone()));
        st.copy_start = Some(start_seq);
        st.copy_done = None;
        Ok(CopyJob {
            start_seq,
            files,
            file: 0,
            offset: 0,
            started: Instant::now(),
            bytes: 0,
        })
    }

    /// Reads and queues one chunk (under the file's lock); `true` once `CopyDone` is queued.
    fn next_chunk(&mut self, shared: &Shared) -> io::Result<bool> {
        // Pace: at most copy_bytes_per_s since the start.
        let due =
            Duration::from_secs_f64(self.bytes as f64 / shared.config.copy_bytes_per_s as f64);
        if let Some(wait) = due.checked_sub(self.started.elapsed()) {
            std::thread::sleep(wait.min(Duration::from_millis(100)));
            return Ok(false);
        }
        let Some((rel, _)) = self.files.get(self.file) else {
            let mut st = shared.state();
            let seq = shared.push(&mut st, Entry::CopyDone);
            st.copy_done = Some(seq);
            st.catch_up_target = Some(seq);
            return Ok(true);
        };
        let rel = rel.clone();
        let name = shared.file_name(&rel);
        let held = lock(&name.lock);
        let file = match shared.inner.open(&shared.config.root.join(&rel), false) {
            Ok(file) => file,
            // Removed since the listing: its removal is in the stream.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                drop(held);
                self.file += 1;
                self.offset = 0;
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        let len = file.len()?;
        if self.offset >= len {
            drop(held);
            self.file += 1;
            self.offset = 0;
            return Ok(false);
        }
        let n = (len - self.offset).min(COPY_CHUNK_BYTES as u64) as usize;
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, self.offset)?;
        let op = if buf.iter().all(|&b| b == 0) {
            Op::Zeros {
                path: rel,
                offset: self.offset,
                len: n as u64,
            }
        } else {
            Op::Write {
                path: rel,
                offset: self.offset,
                bytes: buf,
            }
        };
        {
            let mut st = shared.state();
            shared.push(&mut st, Entry::Op(op));
        }
        drop(held);
        self.offset += n as u64;
        self.bytes += n as u64;
        Ok(false)
    }
}

//! The parallel file system (dissertation chapter 6): clients stripe each request
//! round-robin in `stripe_bytes` units over the I/O servers, one payload per server; the
//! network carries messages in MTU-sized packets over per-node links (each link a FIFO at
//! its bandwidth, a fixed latency between them); each server takes requests from its
//! per-client receive buffers first come, first served, and runs them on its own local file
//! system model (page cache, writeback, journal, device).
//!
//! Each client works on its own region of the file, sequentially, one request at a time.

use std::collections::{HashMap, VecDeque};

use des::{Latencies, Nanos, Scheduler};
use sim_models::localfs::{LocalFs, Step};
use sim_models::pagecache::PAGE_BYTES;
use sim_models::{Op, Request};

use crate::direct::{block_layer, local_fs};
use crate::error::SimError;
use crate::report::Run;
pub use crate::scenario::pvfs_params::{NODES_MAX, PvfsParams};
use crate::scenario::{Scenario, Workload};

impl PvfsParams {
    /// Time on one link for a message of `bytes` (packets with their headers).
    fn wire_ns(&self, bytes: u64) -> Nanos {
        let payload = self.mtu_bytes - self.header_bytes;
        let packets = bytes.div_ceil(payload).max(1);
        let wire = bytes + packets * self.header_bytes;
        (wire as f64 / (self.link_mb_s * 1e6) * 1e9).round() as Nanos
    }
}

/// Nodes: clients `0..c`, servers `c..c+s`.
struct Net {
    busy_until: Vec<Nanos>,
}

impl Net {
    /// A message from `from` to `to` sent at `now`: serialised on the sender's link, the
    /// latency, then on the receiver's link. Returns its arrival.
    fn send(&mut self, p: &PvfsParams, now: Nanos, from: usize, to: usize, bytes: u64) -> Nanos {
        let wire = p.wire_ns(bytes);
        let sent = self.busy_until[from].max(now) + wire;
        self.busy_until[from] = sent;
        let reached = sent + (p.latency_us * 1e3).round() as Nanos;
        // Store and forward: the receiver's link takes it after the one before.
        let received = self.busy_until[to].max(reached - wire.min(reached)) + wire;
        self.busy_until[to] = received;
        received.max(reached)
    }
}

enum Ev {
    /// A client's next request.
    Issue {
        client: usize,
    },
    /// A payload reaches a server's receive buffer for `client`.
    AtServer {
        server: usize,
        client: usize,
        part: Part,
    },
    /// A server's reply reaches the client.
    AtClient {
        client: usize,
    },
    Io {
        server: usize,
        req: Request,
    },
    CallDone {
        server: usize,
        call: u64,
    },
    Tick {
        server: usize,
    },
}

/// One server's share of a client request: a range of its local file.
#[derive(Clone, Copy)]
struct Part {
    offset: u64,
    bytes: u64,
}

struct Server {
    fs: LocalFs,
    file: u32,
    /// Per-client receive buffers, served first come, first served.
    buffers: HashMap<usize, VecDeque<Part>>,
    arrivals: VecDeque<usize>,
    busy: Option<(u64, usize, Part)>,
    next_call: u64,
}

pub(crate) fn run(s: &Scenario, w: &Workload, seed: u64) -> Result<Run, SimError> {
    let p = &s.pvfs;
    p.check().map_err(SimError::Scenario)?;
    let (clients, servers) = (p.clients as usize, p.servers as usize);
    let per_client = w.bytes;
    let record = w.record_bytes;
    let total = per_client * clients as u64;
    // The file striped over the servers: each server's local file holds its units.
    let local_bytes = total.div_ceil(p.stripe_bytes * servers as u64) * p.stripe_bytes;
    let mut nodes = Vec::new();
    for i in 0..servers {
        let mut fs = local_fs(s, block_layer(s, seed, 10 + i as u64)?);
        let file = fs
            .create(local_bytes.max(PAGE_BYTES))
            .map_err(SimError::Scenario)?;
        nodes.push(Server {
            fs,
            file,
            buffers: HashMap::new(),
            arrivals: VecDeque::new(),
            busy: None,
            next_call: 0,
        });
    }
    let mut net = Net {
        busy_until: vec![0; clients + servers],
    };
    let mut sim: Scheduler<Ev> = Scheduler::new();
    // Per client: next offset in its region, parts outstanding, when the request started.
    let mut next: Vec<u64> = vec![0; clients];
    let mut waiting: Vec<usize> = vec![0; clients];
    let mut started: Vec<Nanos> = vec![0; clients];
    let mut latencies = Latencies::new();
    let mut requests = 0u64;
    let mut finished = 0usize;
    for c in 0..clients {
        sim.at(0, Ev::Issue { client: c });
    }
    for i in 0..servers {
        sim.at(
            s.writeback.writeback_interval_ms * des::MILLISECOND,
            Ev::Tick { server: i },
        );
    }
    // Runs the next request waiting at a server, if it is idle.
    fn serve(
        node: &mut Server,
        server: usize,
        now: Nanos,
        op: Op,
        sim: &mut Scheduler<Ev>,
    ) -> Result<(), SimError> {
        if node.busy.is_some() {
            return Ok(());
        }
        let Some(client) = node.arrivals.pop_front() else {
            return Ok(());
        };
        let Some(part) = node.buffers.get_mut(&client).and_then(VecDeque::pop_front) else {
            return Ok(());
        };
        let call = node.next_call;
        node.next_call += 1;
        node.busy = Some((call, client, part));
        let step = match op {
            Op::Read => node.fs.read(now, call, node.file, part.offset, part.bytes),
            Op::Write => node
                .fs
                .write(now, call, node.file, part.offset, part.bytes, false),
        }
        .map_err(SimError::Model)?;
        apply(server, step, sim);
        Ok(())
    }
    fn apply(server: usize, step: Step, sim: &mut Scheduler<Ev>) {
        for d in step.dispatches {
            sim.at(d.at, Ev::Io { server, req: d.req });
        }
        for c in step.done {
            sim.at(
                c.at,
                Ev::CallDone {
                    server,
                    call: c.call,
                },
            );
        }
    }
    while finished < clients
        && let Some(ev) = sim.pop()
    {
        let now = sim.now();
        match ev {
            Ev::Issue { client } => {
                let at = client as u64 * per_client + next[client];
                let len = record.min(per_client - next[client]);
                next[client] += len;
                started[client] = now;
                // Split into stripe units, one payload per server.
                let mut parts: Vec<Option<Part>> = vec![None; servers];
                let mut o = at;
                while o < at + len {
                    let unit = o / p.stripe_bytes;
                    let in_unit = o % p.stripe_bytes;
                    let n = (p.stripe_bytes - in_unit).min(at + len - o);
                    let server = (unit % servers as u64) as usize;
                    let local = (unit / servers as u64) * p.stripe_bytes + in_unit;
                    let part = parts[server].get_or_insert(Part {
                        offset: local,
                        bytes: 0,
                    });
                    part.bytes += n;
                    o += n;
                }
                for (server, part) in parts.into_iter().enumerate() {
                    let Some(part) = part else { continue };
                    waiting[client] += 1;
                    // Writes carry their data; reads a small request.
                    let bytes = if w.op == Op::Write {
                        part.bytes
                    } else {
                        p.control_bytes
                    };
                    let arrive = net.send(p, now, client, clients + server, bytes);
                    sim.at(
                        arrive,
                        Ev::AtServer {
                            server,
                            client,
                            part,
                        },
                    );
                }
            }
            Ev::AtServer {
                server,
                client,
                part,
            } => {
                let node = &mut nodes[server];
                node.buffers.entry(client).or_default().push_back(part);
                node.arrivals.push_back(client);
                serve(node, server, now, w.op, &mut sim)?;
            }
            Ev::Io { server, req } => {
                let step = nodes[server]
                    .fs
                    .complete(now, &req)
                    .map_err(SimError::Model)?;
                apply(server, step, &mut sim);
            }
            Ev::Tick { server } => {
                let (step, at) = nodes[server].fs.tick(now).map_err(SimError::Model)?;
                apply(server, step, &mut sim);
                sim.at(at, Ev::Tick { server });
            }
            Ev::CallDone { server, call } => {
                let node = &mut nodes[server];
                let Some((c, client, part)) = node.busy.take() else {
                    continue;
                };
                if c != call {
                    node.busy = Some((c, client, part));
                    continue;
                }
                // Reads send their data back; writes an acknowledgement.
                let bytes = if w.op == Op::Read {
                    part.bytes
                } else {
                    p.control_bytes
                };
                let arrive = net.send(p, now, clients + server, client, bytes);
                sim.at(arrive, Ev::AtClient { client });
                serve(node, server, now, w.op, &mut sim)?;
            }
            Ev::AtClient { client } => {
                waiting[client] -= 1;
                if waiting[client] > 0 {
                    continue;
                }
                latencies.record(now - started[client]);
                requests += 1;
                if next[client] < per_client {
                    sim.at(now, Ev::Issue { client });
                } else {
                    finished += 1;
                }
            }
        }
    }
    let end = sim.now();
    let mut util = 0.0;
    let mut queue = 0.0;
    for n in &mut nodes {
        let r = n.fs.block.report(end);
        util += r.station.utilisation;
        queue += r.station.mean_queue;
    }
    Ok(Run {
        seconds: end as f64 / 1e9,
        bytes: total,
        requests,
        latencies,
        utilisation: util / servers as f64,
        mean_queue: queue / servers as f64,
        merges: 0,
        hit_ratio: 0.0,
        bottleneck: None,
    })
}

//! The mail cluster (issue 20; the seed's Tables 3 and 4): `nodes` mail servers sharing one
//! directory database. Messages arrive at a constant rate, each at the next node in turn
//! (DNS round robin), for a recipient owned by a node drawn uniformly (users spread evenly),
//! so `(n - 1) / n` of them are handed over to their owner.
//!
//! - **A node** is one CPU station: its CPU set of `node_cores` cores (`ceil` servers
//!   sharing them; a fraction is a quota). A message stored where it was accepted costs
//!   `local_ns`; a handed-over one costs `sender_ns` on the accepting node and `owner_ns` on
//!   the owner (queue, LMTP, store on each side).
//! - **The network**: each node's full-duplex link (a FIFO each way), store and forward,
//!   `wire_bytes` per handed-over message (both ways summed), a one-way `latency_us`.
//! - **The directory** (the shared PostgreSQL) is one station of `directory_cores` servers,
//!   `directory_query_ns` per statement. Its load: `queries_per_message` on a message's path
//!   (0 in steady state: the nodes answer from their cache), `node_queries_per_s` from every
//!   node in the background (lease renewals, node polls), and last-login writes (at most
//!   one a minute per user: `users_per_node / max(login_interval_s, 60)` a second per node).
//! - **Disks** (issue 40): each node's own, `sync_us` per fdatasync and `disk_mb_s` of writes
//!   shared by its three group committers (the queue's writer: 1 sync; the store's:
//!   `store_syncs`; the replica's: 1), each committing every write waiting when it starts.
//! - **Replication** (issue 40): `replicas` copies. A message's queue write (before the SMTP
//!   `250`) and its store write (before it counts as stored) each go to the writer's own
//!   committer and to its `replicas - 1` partners (the next nodes round the ring): sent
//!   (`replica_send_ns` on the writer, `replica_wire_bytes` on the links), applied
//!   (`replica_ns` on the partner), synced in the partner's replica group commit, answered
//!   (one latency back); the write is done when every copy is durable.
//! - **The load generator**: `generator_ns` per message, on `generator_cores` of its own, or
//!   (0 cores) on the entry node's CPU set, as on a machine with fewer cores than nodes plus
//!   generator.
//! - **Closed loop** (`connections_per_node > 0`): that many clients per node, each sending
//!   its next message on the previous one's `250`, for `seconds`; the result is stored
//!   copies over the time to the last one stored, as `bench/run-cluster-scale.sh` measures.
//!
//! With `rate_per_s = 0` and no closed loop the run is the seed's method: steps of `seconds`
//! at a constant rate, raised by a quarter until the messages take longer to store than to
//! offer by more than 5 %; the step that stored the most per second is the result. The bottleneck line names the
//! busiest station at that step. A model never owns anything but its own event queue here:
//! one `Scheduler` per step, deterministic for a seed.

use std::collections::VecDeque;

use des::{Latencies, Nanos, Scheduler, Station};
use rand::RngExt as _;

use crate::error::SimError;
use crate::report::Run;
use crate::scenario::Workload;
pub use crate::scenario::cluster_params::{
    CONNECTIONS_PER_NODE_MAX, ClusterParams, NODES_MAX, REPLICAS_MAX,
};

/// Messages in one step at most (100 M would take minutes).
pub const STEP_MESSAGES_MAX: f64 = 20e6;

/// A closed-loop run whose busiest station is below this is reported as latency-bound: its
/// clients wait on commits and round trips, not on a full station.
const SATURATED: f64 = 0.9;

/// What each station allows alone, messages a second (no queueing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    /// The nodes' CPU sets together.
    pub cpu: f64,
    /// The directory's time left after the nodes' background statements.
    pub directory: f64,
    /// The nodes' links (hand-overs and replicated writes).
    pub network: f64,
    /// The nodes' disks' write bandwidth (every copy's queue and store writes).
    pub disk: f64,
    /// The load generator's own cores (infinite when it shares the nodes').
    pub generator: f64,
}

impl Capacity {
    /// The least of them: the model's throughput bound.
    pub fn bound(&self) -> f64 {
        self.cpu
            .min(self.directory)
            .min(self.network)
            .min(self.disk)
            .min(self.generator)
    }
}

impl ClusterParams {
    fn remote(&self) -> f64 {
        if self.remote_share < 0.0 {
            f64::from(self.nodes - 1) / f64::from(self.nodes)
        } else {
            self.remote_share
        }
    }

    /// Directory statements a second from the nodes whatever the mail: leases, polls,
    /// last-login writes.
    pub fn background_queries_per_s(&self) -> f64 {
        let logins = if self.login_interval_s > 0.0 {
            self.users_per_node as f64 / self.login_interval_s.max(60.0)
        } else {
            0.0
        };
        f64::from(self.nodes) * (self.node_queries_per_s + logins)
    }

    /// Copies beyond the first: partners each write goes to.
    fn partners_per_write(&self) -> f64 {
        f64::from(self.replicas.saturating_sub(1))
    }

    /// The load generator's CPU runs on the nodes' CPU sets.
    fn generator_shares_nodes(&self) -> bool {
        self.generator_cores == 0.0 && self.generator_ns > 0.0
    }

    /// CPU per message on the nodes, all of them together (core-ns): accepting and storing
    /// it (locally or handed over), two replicated writes (the queue's and the store's) to
    /// each partner, sent and applied, and the load generator's share when it runs there.
    pub fn node_ns_per_message(&self) -> f64 {
        let r = self.remote();
        let generator = if self.generator_shares_nodes() {
            self.generator_ns
        } else {
            0.0
        };
        (1.0 - r) * self.local_ns
            + r * (self.sender_ns + self.owner_ns)
            + 2.0 * self.partners_per_write() * (self.replica_send_ns + self.replica_ns)
            + generator
    }

    /// Bytes a message puts on the nodes' links: its hand-over, and two replicated writes to
    /// each partner.
    pub fn wire_bytes_per_message(&self) -> f64 {
        self.remote() * self.wire_bytes as f64
            + 2.0 * self.partners_per_write() * self.replica_wire_bytes as f64
    }

    /// What each station allows alone (no queueing).
    pub fn capacity(&self) -> Capacity {
        let n = f64::from(self.nodes);
        let cpu = n * self.node_cores * 1e9 / self.node_ns_per_message().max(1e-9);
        let left = f64::from(self.directory_cores) * 1e9
            - self.background_queries_per_s() * self.directory_query_ns;
        let directory = if self.queries_per_message * self.directory_query_ns > 0.0 {
            (left / (self.queries_per_message * self.directory_query_ns)).max(0.0)
        } else if left > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        // Every byte leaves on one node's link and arrives on another's.
        let bytes = self.wire_bytes_per_message();
        let network = if self.link_mb_s > 0.0 && bytes > 0.0 {
            n * self.link_mb_s * 1e6 / bytes
        } else {
            f64::INFINITY
        };
        // Each copy is written twice: into a queue, then into a mailbox store.
        let written = 2.0 * f64::from(self.replicas) * self.message_bytes as f64;
        let disk = if self.disk_mb_s > 0.0 {
            n * self.disk_mb_s * 1e6 / written
        } else {
            f64::INFINITY
        };
        let generator = if self.generator_cores > 0.0 && self.generator_ns > 0.0 {
            self.generator_cores * 1e9 / self.generator_ns
        } else {
            f64::INFINITY
        };
        Capacity {
            cpu,
            directory,
            network,
            disk,
            generator,
        }
    }
}

/// Which write of a message: into the accepting node's queue (before the SMTP `250`), or
/// into the owner's mailbox store (the copy is then stored).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stage {
    Queue,
    Store,
}

/// CPU work of message `m` on one station.
#[derive(Clone, Copy, Debug)]
enum Work {
    /// The load generator's CPU (on its own station, or on the entry node's).
    Generate(u64),
    /// The entry node's CPU: a local copy's whole cost, or the sender's part of a hand-over,
    /// plus sending its replicated writes.
    Accept(u64),
    /// The owner's part of a hand-over, plus sending the store write's replicas.
    Own(u64),
    /// A partner applying a replicated write.
    Apply(u64, Stage),
}

/// A node's group committers: each commits every write waiting when it starts, in one
/// round of `syncs` fdatasyncs (the queue's writer, the store's committer, the replica's).
#[derive(Clone, Copy, Debug)]
enum Committer {
    Queue = 0,
    Store = 1,
    Replica = 2,
}

enum Ev {
    /// A closed-loop client's message `m` (its record made when it was sent).
    Arrive(u64),
    /// The open loop's `k`-th message is due.
    OpenArrive(u64),
    /// Station `i` (a node, or the load generator at index `nodes`) finished `Work`.
    CpuDone(usize, Work),
    DirDone,
    /// A transfer reached node `i`: the work it brings.
    Reach(usize, Work),
    /// Node `i`'s committer finished a round.
    CommitDone(usize, Committer),
    /// One copy of a message's write is durable (the writer's own, or a partner's).
    Ack(u64, Stage),
    /// A node's background statements (leases, polls, logins) are due.
    Background(usize),
}

enum DirJob {
    /// Message `m`'s statements before it is accepted.
    Message(u64, u32),
    Background,
}

struct Msg {
    arrived: Nanos,
    entry: usize,
    owner: usize,
    /// The closed-loop client that sent it.
    client: usize,
    /// Copies of the current stage's write not yet durable.
    pending: u32,
}

#[derive(Default)]
struct Commits {
    waiting: Vec<(u64, Stage)>,
    flying: Vec<(u64, Stage)>,
}

struct Step {
    stored: u64,
    offered: u64,
    /// From the first arrival to the last copy stored.
    seconds: f64,
    latencies: Latencies,
    /// Mean time from a message's arrival to its `250` (queue stage durable everywhere).
    ack_mean_ns: f64,
    reports: Vec<(String, f64)>,
}

/// One step's state: the stations, the messages, the event queue.
struct Model<'a> {
    p: &'a ClusterParams,
    n: usize,
    sim: Scheduler<Ev>,
    rng: des::Stream,
    remote: f64,
    /// The nodes' CPU sets, then the load generator's when it has its own.
    cpus: Vec<Station>,
    /// Speed of one server of each CPU station, in cores.
    speed: Vec<f64>,
    lines: Vec<VecDeque<Work>>,
    dir: Station,
    dir_line: VecDeque<DirJob>,
    dir_running: VecDeque<DirJob>,
    /// Per node: when its outgoing and incoming sides are free, and their busy time.
    links: Vec<Nanos>,
    link_busy: Vec<Nanos>,
    /// Per node: when its disk's write bandwidth is free, and its busy time.
    disk_free: Vec<Nanos>,
    disk_busy: Vec<Nanos>,
    commits: Vec<[Commits; 3]>,
    msgs: Vec<Msg>,
    latencies: Latencies,
    stored: u64,
    last: Nanos,
    acks: u64,
    ack_ns: u128,
    /// Closed loop: clients send no new message from then on.
    deadline: Nanos,
    closed: bool,
}

impl Model<'_> {
    fn now(&self) -> Nanos {
        self.sim.now()
    }

    fn cost(&self, station: usize, work: Work) -> Nanos {
        let p = self.p;
        let sends = self.p.partners_per_write() * p.replica_send_ns;
        let ns = match work {
            Work::Generate(_) => p.generator_ns,
            Work::Accept(m) => {
                let msg = &self.msgs[m as usize];
                if msg.owner == msg.entry {
                    // Its queue write and its store write are both sent to the partners.
                    p.local_ns + 2.0 * sends
                } else {
                    p.sender_ns + sends
                }
            }
            Work::Own(_) => p.owner_ns + sends,
            Work::Apply(..) => p.replica_ns,
        };
        (ns / self.speed[station]).round() as Nanos
    }

    fn enqueue_cpu(&mut self, i: usize, work: Work) {
        let now = self.now();
        self.cpus[i].enqueue(now);
        self.lines[i].push_back(work);
        self.start_cpu(i);
    }

    fn start_cpu(&mut self, i: usize) {
        let now = self.now();
        while self.cpus[i].idle_server() {
            let Some(work) = self.lines[i].pop_front() else {
                return;
            };
            self.cpus[i].dequeue(now);
            self.cpus[i].start(now);
            let done = now + self.cost(i, work);
            self.sim.at(done, Ev::CpuDone(i, work));
        }
    }

    /// A new message from `client` entering at `entry`; its owner drawn as the model says.
    fn new_message(&mut self, entry: usize, client: usize) -> u64 {
        let n = self.n;
        let owner = if n > 1 && self.rng.random::<f64>() < self.remote {
            let other = self.rng.random_range(0..n - 1);
            if other >= entry { other + 1 } else { other }
        } else {
            entry
        };
        self.msgs.push(Msg {
            arrived: self.now(),
            entry,
            owner,
            client,
            pending: 0,
        });
        (self.msgs.len() - 1) as u64
    }

    fn arrive(&mut self, m: u64) {
        let q = self.p.queries_per_message;
        let count = q.floor() as u32 + u32::from(self.rng.random::<f64>() < q.fract());
        if count > 0 {
            let now = self.now();
            self.dir.enqueue(now);
            self.dir_line.push_back(DirJob::Message(m, count));
            self.start_dir();
        } else {
            self.admit(m);
        }
    }

    fn admit(&mut self, m: u64) {
        let entry = self.msgs[m as usize].entry;
        if self.p.generator_ns > 0.0 {
            let station = if self.p.generator_shares_nodes() {
                entry
            } else {
                self.n
            };
            self.enqueue_cpu(station, Work::Generate(m));
        } else {
            self.enqueue_cpu(entry, Work::Accept(m));
        }
    }

    fn start_dir(&mut self) {
        let now = self.now();
        let dir_ns = self.p.directory_query_ns.round() as Nanos;
        while self.dir.idle_server() {
            let Some(job) = self.dir_line.pop_front() else {
                break;
            };
            self.dir.dequeue(now);
            self.dir.start(now);
            self.dir_running.push_back(job);
            self.sim.at(now + dir_ns, Ev::DirDone);
        }
    }

    /// Message `m`'s `stage` write on `node`: its own group commit, and one replicated write
    /// to each partner; the stage is done when all of them are durable.
    fn write(&mut self, node: usize, m: u64, stage: Stage) {
        self.msgs[m as usize].pending = self.p.replicas;
        let own = match stage {
            Stage::Queue => Committer::Queue,
            Stage::Store => Committer::Store,
        };
        self.commit(node, own, m, stage);
        let now = self.now();
        for k in 1..self.p.replicas as usize {
            let partner = (node + k) % self.n;
            let at = transfer(
                self.p,
                now,
                node,
                partner,
                self.p.replica_wire_bytes,
                &mut self.links,
                &mut self.link_busy,
            );
            self.sim.at(at, Ev::Reach(partner, Work::Apply(m, stage)));
        }
    }

    fn commit(&mut self, node: usize, committer: Committer, m: u64, stage: Stage) {
        let c = &mut self.commits[node][committer as usize];
        c.waiting.push((m, stage));
        if c.flying.is_empty() {
            self.start_commit(node, committer);
        }
    }

    /// A round of `committer` on `node`: every write waiting, its bytes through the disk's
    /// bandwidth (shared by the node's committers), then its fdatasyncs. The committers' syncs
    /// overlap (each flushes its own preallocated file; a device takes several flushes at
    /// once): a disk bounds throughput by its bandwidth, and latency by its syncs. (A disk
    /// doing one round at a time predicted half the one-node rate measured, issue 40.)
    fn start_commit(&mut self, node: usize, committer: Committer) {
        let now = self.now();
        let c = &mut self.commits[node][committer as usize];
        if c.waiting.is_empty() {
            return;
        }
        std::mem::swap(&mut c.waiting, &mut c.flying);
        let bytes = c.flying.len() as f64 * self.p.message_bytes as f64;
        let syncs = match committer {
            Committer::Queue | Committer::Replica => 1,
            Committer::Store => self.p.store_syncs,
        };
        let write = if self.p.disk_mb_s > 0.0 {
            (bytes / (self.p.disk_mb_s * 1e6) * 1e9).round() as Nanos
        } else {
            0
        };
        let start = self.disk_free[node].max(now);
        self.disk_free[node] = start + write;
        self.disk_busy[node] += write;
        let sync = (self.p.sync_us * 1e3).round() as Nanos;
        self.sim.at(
            start + write + u64::from(syncs) * sync,
            Ev::CommitDone(node, committer),
        );
    }

    fn commit_done(&mut self, node: usize, committer: Committer) {
        let now = self.now();
        let done = std::mem::take(&mut self.commits[node][committer as usize].flying);
        let latency = (self.p.latency_us * 1e3).round() as Nanos;
        for &(m, stage) in &done {
            match committer {
                // The partner's answer travels back to the writer.
                Committer::Replica => self.sim.at(now + latency, Ev::Ack(m, stage)),
                Committer::Queue | Committer::Store => self.ack(m, stage),
            }
        }
        // Keep the allocation for the next round.
        let mut done = done;
        done.clear();
        let c = &mut self.commits[node][committer as usize];
        c.flying = done;
        self.start_commit(node, committer);
    }

    fn ack(&mut self, m: u64, stage: Stage) {
        let now = self.now();
        let msg = &mut self.msgs[m as usize];
        msg.pending -= 1;
        if msg.pending > 0 {
            return;
        }
        let (entry, owner, client, arrived) = (msg.entry, msg.owner, msg.client, msg.arrived);
        match stage {
            Stage::Queue => {
                // The SMTP `250`: the client sends its next message.
                self.acks += 1;
                self.ack_ns += u128::from(now - arrived);
                if self.closed
                    && now < self.deadline
                    && (self.msgs.len() as f64) < STEP_MESSAGES_MAX
                {
                    let next = self.new_message(entry, client);
                    self.arrive(next);
                }
                if owner == entry {
                    self.write(entry, m, Stage::Store);
                } else {
                    let at = transfer(
                        self.p,
                        now,
                        entry,
                        owner,
                        self.p.wire_bytes,
                        &mut self.links,
                        &mut self.link_busy,
                    );
                    self.sim.at(at, Ev::Reach(owner, Work::Own(m)));
                }
            }
            Stage::Store => {
                self.latencies.record(now - arrived);
                self.stored += 1;
                self.last = now;
            }
        }
    }

    fn cpu_done(&mut self, i: usize, work: Work) {
        let now = self.now();
        self.cpus[i].finish(now);
        match work {
            Work::Generate(m) => {
                let entry = self.msgs[m as usize].entry;
                self.enqueue_cpu(entry, Work::Accept(m));
            }
            Work::Accept(m) => self.write(i, m, Stage::Queue),
            Work::Own(m) => self.write(i, m, Stage::Store),
            Work::Apply(m, stage) => self.commit(i, Committer::Replica, m, stage),
        }
        self.start_cpu(i);
    }
}

fn run_step(p: &ClusterParams, rate: f64, seed: u64) -> Result<Step, SimError> {
    let n = p.nodes as usize;
    let closed = p.connections_per_node > 0;
    let messages = if closed {
        0
    } else {
        (rate * p.seconds).round() as u64
    };
    if messages as f64 > STEP_MESSAGES_MAX {
        return Err(SimError::Scenario(format!(
            "cluster: {messages} messages in one step (at most {STEP_MESSAGES_MAX}); fewer seconds"
        )));
    }
    let gap = if closed { 0.0 } else { 1e9 / rate };
    let station = |name: String, cores: f64| {
        let servers = cores.ceil().max(1.0);
        (Station::new(name, servers as u32), cores / servers)
    };
    let mut cpus = Vec::new();
    let mut speed = Vec::new();
    for i in 0..n {
        let (s, v) = station(format!("node n{} CPU", i + 1), p.node_cores);
        cpus.push(s);
        speed.push(v);
    }
    if p.generator_cores > 0.0 {
        let (s, v) = station("the load generator".into(), p.generator_cores);
        cpus.push(s);
        speed.push(v);
    }
    let stations = cpus.len();
    let deadline = (p.seconds * 1e9).round() as Nanos;
    let mut model = Model {
        p,
        n,
        sim: Scheduler::new(),
        rng: des::stream(seed, 60),
        remote: p.remote(),
        cpus,
        speed,
        lines: vec![VecDeque::new(); stations],
        dir: Station::new("the directory", p.directory_cores),
        dir_line: VecDeque::new(),
        dir_running: VecDeque::new(),
        links: vec![0; 2 * n],
        link_busy: vec![0; 2 * n],
        disk_free: vec![0; n],
        disk_busy: vec![0; n],
        commits: (0..n).map(|_| Default::default()).collect(),
        msgs: Vec::with_capacity(messages as usize),
        latencies: Latencies::new(),
        stored: 0,
        last: 0,
        acks: 0,
        ack_ns: 0,
        deadline,
        closed,
    };
    let bg_per_node = p.background_queries_per_s() / n as f64;
    let bg_gap = if bg_per_node > 0.0 {
        Some((1e9 / bg_per_node).round().max(1.0) as Nanos)
    } else {
        None
    };
    if closed {
        // Every client's first message at once; client k enters at node k mod n.
        for client in 0..n * p.connections_per_node as usize {
            let m = model.new_message(client % n, client);
            model.sim.at(0, Ev::Arrive(m));
        }
    } else if messages > 0 {
        model.sim.at(0, Ev::OpenArrive(0));
    }
    if let Some(g) = bg_gap {
        for i in 0..n {
            // Spread the nodes' timers over one period.
            model.sim.at(g * i as u64 / n as u64, Ev::Background(i));
        }
    }
    let end_of_load = if closed {
        deadline
    } else {
        (messages as f64 * gap) as Nanos
    };
    while let Some(ev) = model.sim.pop() {
        let now = model.now();
        match ev {
            Ev::Arrive(m) => model.arrive(m),
            Ev::OpenArrive(k) => {
                // Open loop: message k enters at node k mod n (the seed's round robin).
                let m = model.new_message((k % n as u64) as usize, 0);
                model.arrive(m);
                if k + 1 < messages {
                    let at = ((k + 1) as f64 * gap).round() as Nanos;
                    model.sim.at(at, Ev::OpenArrive(k + 1));
                }
            }
            Ev::DirDone => {
                model.dir.finish(now);
                match model.dir_running.pop_front() {
                    Some(DirJob::Message(m, left)) if left > 1 => {
                        model.dir.enqueue(now);
                        model.dir_line.push_front(DirJob::Message(m, left - 1));
                    }
                    Some(DirJob::Message(m, _)) => model.admit(m),
                    _ => {}
                }
                model.start_dir();
            }
            Ev::Background(i) => {
                model.dir.enqueue(now);
                model.dir_line.push_back(DirJob::Background);
                model.start_dir();
                // Background load only while mail is offered or still being stored.
                let issued = model.msgs.len() as u64;
                if let Some(g) = bg_gap
                    && (now < end_of_load || model.stored < issued)
                {
                    model.sim.at(now + g, Ev::Background(i));
                }
            }
            Ev::CpuDone(i, work) => model.cpu_done(i, work),
            Ev::Reach(i, work) => model.enqueue_cpu(i, work),
            Ev::CommitDone(i, committer) => model.commit_done(i, committer),
            Ev::Ack(m, stage) => model.ack(m, stage),
        }
    }
    if closed && model.msgs.len() as f64 >= STEP_MESSAGES_MAX {
        return Err(SimError::Scenario(format!(
            "cluster: more than {STEP_MESSAGES_MAX} messages in one closed-loop step; fewer seconds"
        )));
    }
    let span = model.last.max(1);
    // Stations may have moved past the last stored copy (background statements, a job in
    // flight): their utilisation is taken at the last event, never before it.
    let end = model.sim.now().max(span);
    let mut reports: Vec<(String, f64)> = model
        .cpus
        .iter_mut()
        .map(|c| {
            let r = c.report(end);
            (r.name, r.utilisation)
        })
        .collect();
    reports.push(("the directory".into(), model.dir.report(end).utilisation));
    for (i, busy) in model.link_busy.iter().enumerate() {
        let side = if i % 2 == 0 { "out" } else { "in" };
        reports.push((
            format!("n{}'s link ({side})", i / 2 + 1),
            *busy as f64 / end as f64,
        ));
    }
    if p.disk_mb_s > 0.0 {
        for (i, busy) in model.disk_busy.iter().enumerate() {
            reports.push((format!("n{}'s disk", i + 1), *busy as f64 / end as f64));
        }
    }
    Ok(Step {
        stored: model.stored,
        offered: model.msgs.len() as u64,
        seconds: span as f64 / 1e9,
        latencies: model.latencies,
        ack_mean_ns: model.ack_ns as f64 / model.acks.max(1) as f64,
        reports,
    })
}

/// A transfer of `bytes` from `from` to `to` at `now`: the sender's outgoing side, the
/// latency, the receiver's incoming side (store and forward). Its arrival.
fn transfer(
    p: &ClusterParams,
    now: Nanos,
    from: usize,
    to: usize,
    bytes: u64,
    links: &mut [Nanos],
    busy: &mut [Nanos],
) -> Nanos {
    let latency = (p.latency_us * 1e3).round() as Nanos;
    if p.link_mb_s <= 0.0 {
        return now + latency;
    }
    let wire = (bytes as f64 / (p.link_mb_s * 1e6) * 1e9).round() as Nanos;
    let (out, inward) = (2 * from, 2 * to + 1);
    let sent = links[out].max(now) + wire;
    links[out] = sent;
    busy[out] += wire;
    let received = links[inward].max(sent + latency - wire.min(sent + latency)) + wire;
    links[inward] = received;
    busy[inward] += wire;
    received.max(sent + latency)
}

pub(crate) fn run(p: &ClusterParams, w: &Workload, seed: u64) -> Result<Run, SimError> {
    p.check().map_err(SimError::Scenario)?;
    let finish = |step: Step| -> Run {
        let (name, busiest) = step
            .reports
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .cloned()
            .unwrap_or_default();
        let dir = step
            .reports
            .iter()
            .find(|r| r.0 == "the directory")
            .map_or(0.0, |r| r.1);
        let offered = if p.connections_per_node > 0 {
            format!(
                "with {} clients (a 250 after {:.2} ms on average)",
                p.connections_per_node * p.nodes,
                step.ack_mean_ns / 1e6
            )
        } else {
            format!("at {:.0} msg/s offered", step.offered as f64 / p.seconds)
        };
        let mut bottleneck = format!(
            "{name} ({:.0} % busy; the directory {:.1} % busy) {offered}",
            busiest * 100.0,
            dir * 100.0,
        );
        if p.connections_per_node > 0 && busiest < SATURATED {
            bottleneck.push_str(
                "; no station saturated: latency-bound (the clients wait on commits and round trips)",
            );
        }
        Run {
            seconds: step.seconds,
            bytes: step.stored * p.message_bytes,
            requests: step.stored,
            latencies: step.latencies,
            utilisation: busiest,
            mean_queue: 0.0,
            merges: 0,
            hit_ratio: 0.0,
            bottleneck: Some(bottleneck),
        }
    };
    if p.rate_per_s > 0.0 || p.connections_per_node > 0 {
        return Ok(finish(run_step(p, p.rate_per_s, seed)?));
    }
    // The seed's method: raise the rate until the copies are stored more slowly than
    // offered; keep the step that stored the most per second.
    let bound = p.capacity().bound();
    if bound <= 0.0 {
        // The nodes' own statements exceed the directory: lease renewals fall behind and
        // the nodes are taken for down (a lease lasts 6 s), whatever the mail.
        let load = p.background_queries_per_s() * p.directory_query_ns
            / (f64::from(p.directory_cores) * 1e9);
        return Ok(Run {
            seconds: p.seconds,
            bytes: 0,
            requests: 0,
            latencies: Latencies::new(),
            utilisation: 1.0,
            mean_queue: 0.0,
            merges: 0,
            hit_ratio: 0.0,
            bottleneck: Some(format!(
                "the directory: the nodes' background statements alone ask {:.0} % of it (leases would expire)",
                load * 100.0
            )),
        });
    }
    let mut rate = (bound / 8.0).max(1.0 / p.seconds);
    let mut best: Option<Step> = None;
    for _ in 0..64 {
        let step = run_step(p, rate, seed)?;
        let processed = step.stored as f64 / step.seconds;
        let backlog = processed < 0.95 * rate;
        if best
            .as_ref()
            .is_none_or(|b| processed > b.stored as f64 / b.seconds)
        {
            best = Some(step);
        }
        if backlog {
            break;
        }
        rate *= 1.25;
    }
    let best = best.ok_or_else(|| SimError::Model(format!("{}: no step ran", w.name)))?;
    Ok(finish(best))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::WorkloadKind;

    fn throughput(p: &ClusterParams) -> (f64, String) {
        let w = Workload::new("c", WorkloadKind::Cluster);
        let r = run(p, &w, 1).unwrap();
        (r.requests as f64 / r.seconds, r.bottleneck.unwrap())
    }

    fn quick() -> ClusterParams {
        ClusterParams {
            seconds: 2.0,
            ..ClusterParams::default()
        }
    }

    #[test]
    fn one_node_stores_at_its_cpu_rate() {
        let p = ClusterParams {
            nodes: 1,
            ..quick()
        };
        let (got, why) = throughput(&p);
        // 0.25 core / 200 us = 1,250 msg/s.
        assert!((got / 1250.0 - 1.0).abs() < 0.05, "{got} {why}");
        assert!(why.starts_with("node n1 CPU"), "{why}");
    }

    #[test]
    fn more_nodes_scale_near_linearly_with_the_remote_share_as_overhead() {
        let one = throughput(&ClusterParams {
            nodes: 1,
            ..quick()
        })
        .0;
        for nodes in [2u32, 4, 8] {
            let p = ClusterParams { nodes, ..quick() };
            let (got, _) = throughput(&p);
            let want = p.capacity().cpu;
            assert!(
                (got / want - 1.0).abs() < 0.08,
                "{nodes}: {got} against {want}"
            );
            assert!(got > one * f64::from(nodes) * 0.6, "{nodes}: {got}");
        }
    }

    #[test]
    fn the_directory_is_the_bottleneck_when_every_message_asks_it() {
        let p = ClusterParams {
            nodes: 8,
            queries_per_message: 2.0,
            directory_query_ns: 200_000.0,
            ..quick()
        };
        let (got, why) = throughput(&p);
        // One server, 2 x 200 us a message: 2,500 msg/s, less the background.
        let dir = p.capacity().directory;
        assert!(
            dir < 2500.0 && (got / dir - 1.0).abs() < 0.08,
            "{got} {dir}"
        );
        assert!(why.starts_with("the directory"), "{why}");
    }

    #[test]
    fn logins_load_the_directory_in_the_background() {
        let p = ClusterParams {
            nodes: 16,
            users_per_node: 50_000,
            login_interval_s: 600.0,
            directory_query_ns: 100_000.0,
            ..quick()
        };
        // 16 x (1.5 + 83.3) statements/s x 100 us = 13.6 % of the directory.
        let bg = p.background_queries_per_s();
        assert!((bg - 16.0 * (1.5 + 50_000.0 / 600.0)).abs() < 1e-6);
        let (_, why) = throughput(&p);
        assert!(why.contains("the directory 13."), "{why}");
    }

    #[test]
    fn a_slow_network_bounds_the_handed_over_messages() {
        let p = ClusterParams {
            nodes: 4,
            link_mb_s: 1.0,
            ..quick()
        };
        let (got, why) = throughput(&p);
        let net = p.capacity().network;
        assert!(got < net * 1.05, "{got} {net}");
        assert!(why.contains("link"), "{why}");
    }

    #[test]
    fn a_directory_swamped_by_logins_stores_nothing_and_says_why() {
        let p = ClusterParams {
            nodes: 16,
            users_per_node: 50_000,
            login_interval_s: 60.0,
            directory_query_ns: 100_000.0,
            ..quick()
        };
        // 16 x 835 statements/s x 100 us = 1.3 directory cores.
        let (got, why) = throughput(&p);
        assert_eq!(got, 0.0);
        assert!(why.contains("leases would expire"), "{why}");
    }

    #[test]
    fn a_run_repeats_for_a_seed() {
        let p = ClusterParams {
            nodes: 5,
            ..quick()
        };
        let w = Workload::new("c", WorkloadKind::Cluster);
        let a = run(&p, &w, 7).unwrap();
        let b = run(&p, &w, 7).unwrap();
        assert_eq!((a.requests, a.seconds), (b.requests, b.seconds));
        assert!(p.check().is_ok());
        assert!(
            ClusterParams {
                nodes: 0,
                ..quick()
            }
            .check()
            .is_err()
        );
    }
    /// Free CPU, links, directory and generator: only what a test sets costs anything.
    fn bare() -> ClusterParams {
        ClusterParams {
            node_cores: 1.0,
            local_ns: 0.0,
            sender_ns: 0.0,
            owner_ns: 0.0,
            replica_ns: 0.0,
            replica_send_ns: 0.0,
            link_mb_s: 0.0,
            node_queries_per_s: 0.0,
            seconds: 2.0,
            ..ClusterParams::default()
        }
    }

    fn mean_latency_us(p: &ClusterParams) -> f64 {
        let w = Workload::new("c", WorkloadKind::Cluster);
        let r = run(p, &w, 1).unwrap();
        r.latencies.mean() / 1e3
    }

    #[test]
    fn replication_costs_each_partner_two_applied_writes_of_cpu() {
        let p = ClusterParams {
            nodes: 2,
            local_ns: 100_000.0,
            sender_ns: 100_000.0,
            owner_ns: 50_000.0,
            replicas: 2,
            replica_ns: 40_000.0,
            replica_send_ns: 10_000.0,
            ..bare()
        };
        // Per message: half local (100 us), half handed over (150 us), and the queue's and
        // the store's write each sent (10 us) and applied (40 us) once: 225 us on 2 cores.
        let want = 2e9 / 225_000.0;
        assert!((p.capacity().cpu - want).abs() < 1e-6);
        let (got, why) = throughput(&p);
        assert!(
            (got / want - 1.0).abs() < 0.08,
            "{got} against {want}: {why}"
        );
        assert!(why.starts_with("node n"), "{why}");
    }

    #[test]
    fn replicated_writes_share_the_links_with_hand_overs() {
        let p = ClusterParams {
            nodes: 4,
            link_mb_s: 1.0,
            wire_bytes: 9_000,
            replica_wire_bytes: 9_000,
            replicas: 2,
            ..bare()
        };
        // 3/4 x 9,000 handed over + 2 x 9,000 replicated = 24,750 bytes a message over four
        // 1 MB/s links: 161.6 msg/s.
        let want = 4e6 / 24_750.0;
        assert!((p.capacity().network - want).abs() < 1e-6);
        let (got, why) = throughput(&p);
        assert!(
            got < want * 1.02 && got > want * 0.9,
            "{got} against {want}"
        );
        assert!(why.contains("link"), "{why}");
    }

    #[test]
    fn every_copy_is_written_twice_on_some_disk() {
        let p = ClusterParams {
            nodes: 2,
            disk_mb_s: 10.0,
            replicas: 2,
            ..bare()
        };
        // Two copies, each into a queue and a store: 4 x 8,192 bytes a message over two
        // 10 MB/s disks: 610.4 msg/s.
        let want = 2.0 * 10e6 / (4.0 * 8192.0);
        assert!((p.capacity().disk - want).abs() < 1e-6);
        let (got, why) = throughput(&p);
        assert!(
            (got / want - 1.0).abs() < 0.08,
            "{got} against {want}: {why}"
        );
        assert!(why.contains("disk"), "{why}");
    }

    #[test]
    fn the_load_generator_bounds_on_its_own_cores_and_loads_the_nodes_on_theirs() {
        let own = ClusterParams {
            nodes: 2,
            local_ns: 100_000.0,
            sender_ns: 100_000.0,
            generator_ns: 500_000.0,
            generator_cores: 1.0,
            ..bare()
        };
        // 1 core / 500 us = 2,000 msg/s; the nodes could do 2 cores / 100 us = 20,000.
        assert!((own.capacity().generator - 2000.0).abs() < 1e-6);
        let (got, why) = throughput(&own);
        assert!((got / 2000.0 - 1.0).abs() < 0.08, "{got}: {why}");
        assert!(why.starts_with("the load generator"), "{why}");
        let shared = ClusterParams {
            nodes: 1,
            local_ns: 100_000.0,
            generator_ns: 100_000.0,
            ..bare()
        };
        // 200 us a message on the node's one core: 5,000 msg/s.
        assert!((shared.capacity().cpu - 5000.0).abs() < 1e-6);
        let (got, why) = throughput(&shared);
        assert!((got / 5000.0 - 1.0).abs() < 0.08, "{got}: {why}");
        assert!(why.starts_with("node n1 CPU"), "{why}");
    }

    #[test]
    fn one_closed_loop_client_waits_for_each_queue_sync() {
        let p = ClusterParams {
            nodes: 1,
            local_ns: 100_000.0,
            sync_us: 1000.0,
            connections_per_node: 1,
            ..bare()
        };
        // Each message: 100 us of CPU, then the queue's 1 ms sync before the 250; the store's
        // commit runs beside the next message. 1.1 ms a message: 909 msg/s.
        let (got, why) = throughput(&p);
        assert!((got / 909.1 - 1.0).abs() < 0.01, "{got}: {why}");
        assert!(why.contains("latency-bound"), "{why}");
        // Four clients share the syncs (group commit), but their CPU (100 us each, one after
        // the other) makes each miss the round in flight and wait for the next: two 1 ms
        // rounds a message, 4 / 2 ms = 2,000 msg/s (the queue's writer waits for announced
        // producers, `commit_wait_max`; the model does not).
        let four = ClusterParams {
            connections_per_node: 4,
            ..p.clone()
        };
        let (got4, _) = throughput(&four);
        assert!((got4 / 2000.0 - 1.0).abs() < 0.03, "{got4}");
    }

    #[test]
    fn a_replicated_write_waits_for_the_partners_sync_and_answer() {
        // Messages 100 ms apart: nothing queues, each latency is one path.
        let base = ClusterParams {
            nodes: 2,
            local_ns: 100_000.0,
            owner_ns: 50_000.0,
            sender_ns: 100_000.0,
            sync_us: 1000.0,
            store_syncs: 1,
            latency_us: 50.0,
            rate_per_s: 10.0,
            remote_share: 0.0,
            ..bare()
        };
        // Local, one copy: CPU 100 + queue sync 1,000 + store sync 1,000.
        let one = mean_latency_us(&base);
        assert!((one - 2100.0).abs() < 5.0, "{one}");
        // Two copies: each write also crosses (50), syncs on the partner (1,000) and is
        // answered (50): 100 + 1,100 + 1,100.
        let two = mean_latency_us(&ClusterParams {
            replicas: 2,
            ..base.clone()
        });
        assert!((two - 2300.0).abs() < 5.0, "{two}");
        // Handed over: the sender's 100, the queue write 1,100, the hand-over 50, the
        // owner's 50, its store write 1,100.
        let handed = mean_latency_us(&ClusterParams {
            replicas: 2,
            remote_share: 1.0,
            ..base.clone()
        });
        assert!((handed - 2400.0).abs() < 5.0, "{handed}");
    }

    #[test]
    fn replicas_must_fit_the_nodes() {
        let p = ClusterParams {
            nodes: 1,
            replicas: 2,
            ..quick()
        };
        assert!(p.check().unwrap_err().contains("replicas"));
    }
}

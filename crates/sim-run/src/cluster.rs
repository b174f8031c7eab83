//! The mail cluster (issue 20; the seed's Tables 3 and 4): `nodes` mail servers sharing one
//! directory database. Messages arrive at a constant rate, each at the next node in turn
//! (DNS round robin), for a recipient owned by a node drawn uniformly (users spread evenly),
//! so `(n - 1) / n` of them are handed over to their owner.
//!
//! - **A node** is one CPU station of speed `node_cores`: a message stored where it was
//!   accepted costs `local_ns`; a handed-over one costs `sender_ns` on the accepting node and
//!   `owner_ns` on the owner (queue, LMTP, store on each side).
//! - **The network**: each node's full-duplex link (a FIFO each way), store and forward,
//!   `wire_bytes` per handed-over message (both ways summed), a one-way `latency_us`.
//! - **The directory** (the shared PostgreSQL) is one station of `directory_cores` servers,
//!   `directory_query_ns` per statement. Its load: `queries_per_message` on a message's path
//!   (0 in steady state: the nodes answer from their cache), `node_queries_per_s` from every
//!   node in the background (lease renewals, node polls), and last-login writes (at most
//!   one a minute per user: `users_per_node / max(login_interval_s, 60)` a second per node).
//!
//! With `rate_per_s = 0` the run is the seed's method: steps of `seconds` at a constant rate,
//! raised by a quarter until the messages take longer to store than to offer by more than
//! 5 %; the step that stored the most per second is the result. The bottleneck line names the
//! busiest station at that step. A model never owns anything but its own event queue here:
//! one `Scheduler` per step, deterministic for a seed.

use std::collections::VecDeque;

use des::{Latencies, Nanos, Scheduler, Station};
use rand::RngExt as _;

use crate::error::SimError;
use crate::report::Run;
use crate::scenario::Workload;
pub use crate::scenario::cluster_params::{ClusterParams, NODES_MAX};

/// Messages in one step at most (100 M would take minutes).
pub const STEP_MESSAGES_MAX: f64 = 20e6;

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

    /// What the stations allow, messages a second (no queueing): the nodes' CPU, the
    /// directory's time left after the background, the links.
    pub fn capacity(&self) -> (f64, f64, f64) {
        let r = self.remote();
        let n = f64::from(self.nodes);
        let per_msg = (1.0 - r) * self.local_ns + r * (self.sender_ns + self.owner_ns);
        let cpu = n * self.node_cores * 1e9 / per_msg.max(1e-9);
        let left = f64::from(self.directory_cores) * 1e9
            - self.background_queries_per_s() * self.directory_query_ns;
        let dir = if self.queries_per_message * self.directory_query_ns > 0.0 {
            (left / (self.queries_per_message * self.directory_query_ns)).max(0.0)
        } else if left > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        // Every handed-over message leaves on the sender's link and arrives on the owner's.
        let net = if self.link_mb_s > 0.0 && r > 0.0 && self.wire_bytes > 0 {
            n * self.link_mb_s * 1e6 / (r * self.wire_bytes as f64)
        } else {
            f64::INFINITY
        };
        (cpu, dir, net)
    }
}

#[derive(Clone, Copy)]
enum Job {
    /// Stored where it was accepted.
    Local(u64),
    /// Accepted here, for `owner`.
    Send(u64, usize),
    /// Handed over to this node.
    Own(u64),
}

enum Ev {
    Arrive(u64),
    CpuDone(usize),
    DirDone,
    /// A handed-over message reaches its owner.
    AtOwner(u64, usize),
    /// A node's background statements (leases, polls, logins) are due.
    Background(usize),
}

enum DirJob {
    /// Message `m`'s statements before it is accepted at node `entry`.
    Message(u64, usize, u32),
    Background,
}

struct Step {
    stored: u64,
    offered: u64,
    /// From the first arrival to the last copy stored.
    seconds: f64,
    latencies: Latencies,
    reports: Vec<(String, f64)>,
}

fn run_step(p: &ClusterParams, rate: f64, seed: u64) -> Result<Step, SimError> {
    let n = p.nodes as usize;
    let messages = (rate * p.seconds).round() as u64;
    if messages as f64 > STEP_MESSAGES_MAX {
        return Err(SimError::Scenario(format!(
            "cluster: {messages} messages in one step (at most {STEP_MESSAGES_MAX}); fewer seconds"
        )));
    }
    let gap = 1e9 / rate;
    let remote = p.remote();
    let mut rng = des::stream(seed, 60);
    let mut sim: Scheduler<Ev> = Scheduler::new();
    let mut cpus: Vec<Station> = (0..n)
        .map(|i| Station::new(format!("n{}", i + 1), 1))
        .collect();
    let mut lines: Vec<VecDeque<Job>> = vec![VecDeque::new(); n];
    let mut running: Vec<Option<Job>> = vec![None; n];
    let mut dir = Station::new("directory", p.directory_cores);
    let mut dir_line: VecDeque<DirJob> = VecDeque::new();
    let mut dir_running: VecDeque<DirJob> = VecDeque::new();
    // Per node: when its outgoing and incoming sides are free, and their busy time.
    let mut links: Vec<Nanos> = vec![0; 2 * n];
    let mut link_busy: Vec<Nanos> = vec![0; 2 * n];
    let mut arrived: Vec<Nanos> = vec![0; messages as usize];
    let mut latencies = Latencies::new();
    let mut stored = 0u64;
    let mut last = 0;
    let cpu_ns = |ns: f64| (ns / p.node_cores).round() as Nanos;
    let dir_ns = p.directory_query_ns.round() as Nanos;
    let bg_per_node = p.background_queries_per_s() / n as f64;
    let bg_gap = if bg_per_node > 0.0 {
        Some((1e9 / bg_per_node).round().max(1.0) as Nanos)
    } else {
        None
    };
    if messages > 0 {
        sim.at(0, Ev::Arrive(0));
    }
    if let Some(g) = bg_gap {
        for i in 0..n {
            // Spread the nodes' timers over one period.
            sim.at(g * i as u64 / n as u64, Ev::Background(i));
        }
    }
    let end_of_load = (messages as f64 * gap) as Nanos;

    fn start_cpu(
        i: usize,
        now: Nanos,
        cpus: &mut [Station],
        lines: &mut [VecDeque<Job>],
        running: &mut [Option<Job>],
        sim: &mut Scheduler<Ev>,
        cost: &dyn Fn(Job) -> Nanos,
    ) {
        if running[i].is_some() {
            return;
        }
        let Some(job) = lines[i].pop_front() else {
            return;
        };
        cpus[i].dequeue(now);
        cpus[i].start(now);
        running[i] = Some(job);
        sim.at(now + cost(job), Ev::CpuDone(i));
    }
    let cost = |job: Job| -> Nanos {
        match job {
            Job::Local(_) => cpu_ns(p.local_ns),
            Job::Send(..) => cpu_ns(p.sender_ns),
            Job::Own(_) => cpu_ns(p.owner_ns),
        }
    };
    let enqueue_cpu = |i: usize,
                       job: Job,
                       now: Nanos,
                       cpus: &mut [Station],
                       lines: &mut [VecDeque<Job>],
                       running: &mut [Option<Job>],
                       sim: &mut Scheduler<Ev>| {
        cpus[i].enqueue(now);
        lines[i].push_back(job);
        start_cpu(i, now, cpus, lines, running, sim, &cost);
    };
    let start_dir = |now: Nanos,
                     dir: &mut Station,
                     line: &mut VecDeque<DirJob>,
                     running: &mut VecDeque<DirJob>,
                     sim: &mut Scheduler<Ev>| {
        while dir.idle_server() {
            let Some(job) = line.pop_front() else { break };
            dir.dequeue(now);
            dir.start(now);
            running.push_back(job);
            sim.at(now + dir_ns, Ev::DirDone);
        }
    };
    while let Some(ev) = sim.pop() {
        let now = sim.now();
        match ev {
            Ev::Arrive(m) => {
                arrived[m as usize] = now;
                let entry = (m % n as u64) as usize;
                let q = p.queries_per_message;
                let count = q.floor() as u32 + u32::from(rng.random::<f64>() < q.fract());
                if count > 0 {
                    dir.enqueue(now);
                    dir_line.push_back(DirJob::Message(m, entry, count));
                    start_dir(now, &mut dir, &mut dir_line, &mut dir_running, &mut sim);
                } else {
                    accept(m, entry, now, remote, n, &mut rng, &mut |i, job, now| {
                        enqueue_cpu(i, job, now, &mut cpus, &mut lines, &mut running, &mut sim)
                    });
                }
                if m + 1 < messages {
                    sim.at(((m + 1) as f64 * gap).round() as Nanos, Ev::Arrive(m + 1));
                }
            }
            Ev::DirDone => {
                dir.finish(now);
                match dir_running.pop_front() {
                    Some(DirJob::Message(m, entry, left)) if left > 1 => {
                        dir.enqueue(now);
                        dir_line.push_front(DirJob::Message(m, entry, left - 1));
                    }
                    Some(DirJob::Message(m, entry, _)) => {
                        accept(m, entry, now, remote, n, &mut rng, &mut |i, job, now| {
                            enqueue_cpu(i, job, now, &mut cpus, &mut lines, &mut running, &mut sim)
                        });
                    }
                    _ => {}
                }
                start_dir(now, &mut dir, &mut dir_line, &mut dir_running, &mut sim);
            }
            Ev::Background(i) => {
                dir.enqueue(now);
                dir_line.push_back(DirJob::Background);
                start_dir(now, &mut dir, &mut dir_line, &mut dir_running, &mut sim);
                // Background load only while mail is offered or still being stored.
                if let Some(g) = bg_gap
                    && (now < end_of_load || stored < messages)
                {
                    sim.at(now + g, Ev::Background(i));
                }
            }
            Ev::CpuDone(i) => {
                cpus[i].finish(now);
                let job = running[i].take().expect("a job ran");
                match job {
                    Job::Local(m) | Job::Own(m) => {
                        latencies.record(now - arrived[m as usize]);
                        stored += 1;
                        last = now;
                    }
                    Job::Send(m, owner) => {
                        let at = transfer(p, now, i, owner, &mut links, &mut link_busy);
                        sim.at(at, Ev::AtOwner(m, owner));
                    }
                }
                start_cpu(i, now, &mut cpus, &mut lines, &mut running, &mut sim, &cost);
            }
            Ev::AtOwner(m, owner) => {
                enqueue_cpu(
                    owner,
                    Job::Own(m),
                    now,
                    &mut cpus,
                    &mut lines,
                    &mut running,
                    &mut sim,
                );
            }
        }
    }
    let span = last.max(1);
    // Stations may have moved past the last stored copy (background statements, a job in
    // flight): their utilisation is taken at the last event, never before it.
    let end = sim.now().max(span);
    let mut reports: Vec<(String, f64)> = cpus
        .iter_mut()
        .map(|c| {
            let r = c.report(end);
            (format!("node {} CPU", r.name), r.utilisation)
        })
        .collect();
    reports.push(("the directory".into(), dir.report(end).utilisation));
    for (i, busy) in link_busy.iter().enumerate() {
        let side = if i % 2 == 0 { "out" } else { "in" };
        reports.push((
            format!("n{}'s link ({side})", i / 2 + 1),
            *busy as f64 / end as f64,
        ));
    }
    Ok(Step {
        stored,
        offered: messages,
        seconds: span as f64 / 1e9,
        latencies,
        reports,
    })
}

/// Accepting message `m` at `entry`: stored there, or handed to an owner drawn uniformly
/// among the others.
fn accept(
    m: u64,
    entry: usize,
    now: Nanos,
    remote: f64,
    n: usize,
    rng: &mut des::Stream,
    enqueue: &mut dyn FnMut(usize, Job, Nanos),
) {
    if n > 1 && rng.random::<f64>() < remote {
        let other = rng.random_range(0..n - 1);
        let owner = if other >= entry { other + 1 } else { other };
        enqueue(entry, Job::Send(m, owner), now);
    } else {
        enqueue(entry, Job::Local(m), now);
    }
}

/// A handed-over message from `from` to `to` at `now`: the sender's outgoing side, the
/// latency, the receiver's incoming side (store and forward). Its arrival.
fn transfer(
    p: &ClusterParams,
    now: Nanos,
    from: usize,
    to: usize,
    links: &mut [Nanos],
    busy: &mut [Nanos],
) -> Nanos {
    let latency = (p.latency_us * 1e3).round() as Nanos;
    if p.link_mb_s <= 0.0 {
        return now + latency;
    }
    let wire = (p.wire_bytes as f64 / (p.link_mb_s * 1e6) * 1e9).round() as Nanos;
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
        let bottleneck = format!(
            "{name} ({:.0} % busy; the directory {:.1} % busy) at {:.0} msg/s offered",
            busiest * 100.0,
            dir * 100.0,
            step.offered as f64 / p.seconds
        );
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
    if p.rate_per_s > 0.0 {
        return Ok(finish(run_step(p, p.rate_per_s, seed)?));
    }
    // The seed's method: raise the rate until the copies are stored more slowly than
    // offered; keep the step that stored the most per second.
    let (cpu, dir, net) = p.capacity();
    let bound = cpu.min(dir).min(net);
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
            let (want, _, _) = p.capacity();
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
        let (_, dir, _) = p.capacity();
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
        let (_, _, net) = p.capacity();
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
}

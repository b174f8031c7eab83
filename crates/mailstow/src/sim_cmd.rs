//! `mailstow sim`: the storage simulator (docs/simulator.md).

use std::time::Instant;

use clap::Subcommand;

#[derive(Subcommand)]
pub(crate) enum SimCommand {
    /// Events per second of the simulation core on one core: a closed queueing network of
    /// the shape the storage models have. Last line: `events_per_second=<n>`.
    Speed {
        /// Events to run.
        #[arg(long, default_value_t = 10_000_000)]
        events: u64,
        /// Stations (components) in the network.
        #[arg(long, default_value_t = 64)]
        stations: u32,
        /// Requests circulating among them.
        #[arg(long, default_value_t = 256)]
        jobs: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

pub(crate) fn run(command: SimCommand) -> anyhow::Result<()> {
    match command {
        SimCommand::Speed {
            events,
            stations,
            jobs,
            seed,
        } => {
            anyhow::ensure!(events > 0, "--events must be at least 1");
            anyhow::ensure!(
                stations > 0 && jobs > 0,
                "--stations and --jobs must be at least 1"
            );
            let started = Instant::now();
            let report = des::speed(events, stations, jobs, seed);
            let wall = started.elapsed().as_secs_f64();
            println!("events={}", report.events);
            println!("stations={stations} jobs={jobs} seed={seed}");
            println!("virtual_seconds={:.6}", report.virtual_ns as f64 / 1e9);
            println!("mean_utilisation={:.4}", report.mean_utilisation);
            println!("wall_seconds={wall:.3}");
            println!(
                "events_per_second={:.0}",
                report.events as f64 / wall.max(1e-9)
            );
            Ok(())
        }
    }
}

//! `mailstow-bench`: the measuring tools that are not part of the mail server, as a binary of
//! their own so the shipped `mailstow` links no benchmark, load generator or test fixture.
//! `mailstow bench ARGS...` runs `mailstow-bench bench ARGS...` and `mailstow sim validate
//! ARGS...` runs `mailstow-bench sim validate ARGS...` (crates/mailstow/src/bench_binary.rs);
//! both can be run directly too. Failures are one line on stderr and a non-zero exit, as
//! `mailstow`'s are.

/// `println!` for the commands' output: a closed standard output (`... | head`) is an error
/// the command returns, not a panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

mod bench_cmd;
mod progress;
mod sim_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "mailstow-bench",
    version,
    about = "mailstow's benchmarks and the simulator's validation (run as `mailstow bench` and `mailstow sim validate`)"
)]
struct Cli {
    /// Accepted and ignored, as `mailstow` accepts it before any subcommand.
    #[arg(long, global = true, value_name = "DIR", hide = true)]
    data_dir: Option<PathBuf>,
    /// Accepted and ignored, as `mailstow` accepts it before any subcommand.
    #[arg(long, global = true, value_name = "FILE", hide = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Storage benchmarks (results as RESULT lines on stdout).
    #[command(subcommand)]
    Bench(bench_cmd::BenchCommand),
    /// The storage simulator's validation against this machine.
    #[command(subcommand)]
    Sim(sim_cmd::SimCommand),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Bench(command) => bench_cmd::run(command),
        Command::Sim(command) => sim_cmd::run(command),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`| head`): stop quietly, as a program
        // killed by SIGPIPE does.
        Err(error)
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::from(141)
        }
        Err(error) => {
            // One line, whatever a library put in its message; the prefix is the command's
            // as the operator typed it (`mailstow bench ...`).
            let message: Vec<String> = format!("{error:#}")
                .lines()
                .map(|l| l.trim().to_string())
                .collect();
            eprintln!("mailstow: error: {}", message.join(" "));
            ExitCode::FAILURE
        }
    }
}

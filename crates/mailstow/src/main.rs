//! `mailstow`: one binary with subcommands. This file parses the command line and maps every
//! failure to one line on stderr and a non-zero exit; the work lives in the subcommand modules.

/// `println!` for the commands' output: a closed standard output (`mailstow sim run … |
/// head`) is an error the command returns, not a panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

mod acme_cmd;
mod auth_cmd;
mod backup_cmd;
mod bench_binary;
mod config;
mod config_cmd;
mod data_format;
mod directory_cmd;
mod dkim_cmd;
mod dns_cmd;
mod fs_cmd;
mod logging;
mod mailbox_cmd;
mod node;
mod node_replace;
mod paths;
mod progress;
mod queue_cmd;
mod replica;
mod report_cmd;
mod serve_cmd;
mod setup_cmd;
mod sieve_cmd;
mod sim_cmd;
mod spam_cmd;
mod spam_config;
mod store_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::paths::Paths;

#[derive(Parser)]
#[command(
    name = "mailstow",
    version,
    about = "Mail server, mail file system and storage simulator"
)]
struct Cli {
    /// Data directory (default: the config file's data_dir, else ./mailstow-data).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Configuration file (TOML).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the data directory with an empty queue and store (an existing one is only
    /// opened and recovered).
    Init,
    /// Run the mail server (SMTP, submission, LMTP, POP3, IMAP) until SIGTERM; SIGHUP
    /// reloads the configuration and the certificate.
    Serve(serve_cmd::ServeArgs),
    /// The configuration file: check it and print the effective configuration.
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
    /// Local domains.
    #[command(subcommand)]
    Domain(directory_cmd::DomainCommand),
    /// Users: passwords and quotas.
    #[command(subcommand)]
    User(directory_cmd::UserCommand),
    /// Aliases and catch-alls.
    #[command(subcommand)]
    Alias(directory_cmd::AliasCommand),
    /// Cluster nodes: add, list (up or down, users owned), delete.
    #[command(subcommand)]
    Node(directory_cmd::NodeCommand),
    /// DKIM keys of our domains: generate (and print the DNS record), list, delete.
    #[command(subcommand)]
    Dkim(dkim_cmd::DkimCommand),
    /// Every DNS record a local domain must publish, as zone-file lines (`dns DOMAIN`), or
    /// each one checked against DNS (`dns check DOMAIN`: exit status 1 when any is missing,
    /// wrong or unavailable).
    Dns(dns_cmd::DnsArgs),
    /// A new server in one step: write the config file (--config, default ./mailstow.toml),
    /// make the data directory, add the first domain, its admin user and a DKIM key, and
    /// print the DNS records and the next steps. Flags for scripts; on a terminal, missing
    /// values are asked for.
    Setup(setup_cmd::SetupArgs),
    /// Users' mail rules (Sieve scripts): list, get, put, activate, deactivate, delete,
    /// check.
    #[command(subcommand)]
    Sieve(sieve_cmd::SieveCommand),
    /// The spam filter: train a user's classifier from a folder, show what it holds, set
    /// thresholds per domain or user, release an account limited for sending spam.
    #[command(subcommand)]
    Spam(spam_cmd::SpamCommand),
    /// The certificate obtained by ACME: its status, or a renewal now.
    #[command(subcommand)]
    Acme(acme_cmd::AcmeCommand),
    /// Failed-login blocks of the running server: list them, clear them.
    #[command(subcommand)]
    Auth(auth_cmd::AuthCommand),
    /// A user's mail in from, or out to, maildir trees and mbox files.
    #[command(subcommand)]
    Mailbox(mailbox_cmd::MailboxCommand),
    /// The mailbox store: stats, fsck, defrag.
    #[command(subcommand)]
    Store(store_cmd::StoreCommand),
    /// The mail queue: stats, fsck, list, show, retry, remove.
    #[command(subcommand)]
    Queue(queue_cmd::QueueCommand),
    /// TLS-RPT and DMARC aggregate reports: those received about our domains (list, show)
    /// and those we sent (list --sent).
    #[command(subcommand)]
    Report(report_cmd::ReportCommand),
    /// Back up the queue, the store, the directory, the certificates and the config into
    /// DEST while the server runs (later runs copy only what changed); `backup verify DEST`
    /// checks a backup.
    Backup(backup_cmd::BackupArgs),
    /// Restore a backup into an empty data directory (--data-dir).
    Restore {
        /// The backup (a directory `mailstow backup` wrote).
        #[arg(value_name = "SRC")]
        src: PathBuf,
    },
    /// Storage benchmarks (results as RESULT lines on stdout).
    ///
    /// Run by the separate `mailstow-bench` binary (`mailstow bench --help` lists them).
    #[command(disable_help_flag = true)]
    Bench {
        /// Passed unchanged to `mailstow-bench bench`.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<std::ffi::OsString>,
    },
    /// The mail file system: a FUSE file system kept in IMAP accounts (--config is the
    /// file system's config).
    #[command(subcommand)]
    Fs(fs_cmd::FsCommand),
    /// The storage simulator: models of a local and a parallel file system.
    #[command(subcommand)]
    Sim(sim_cmd::SimCommand),
}

impl Command {
    /// Whether the command works on an existing data directory (all but those that create
    /// one, or need none).
    fn needs_data_dir(&self) -> bool {
        match self {
            Command::Init
            | Command::Serve(_)
            | Command::Config(_)
            | Command::Bench { .. }
            | Command::Fs(_)
            | Command::Sim(_)
            | Command::Setup(_)
            | Command::Restore { .. } => false,
            Command::Backup(args) => !args.is_verify(),
            _ => true,
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    // The file system has its own config file; the server's is not read.
    if let Command::Fs(command) = cli.command {
        return fs_cmd::run(command, cli.config.as_deref());
    }
    // The simulator reads its own scenario files.
    if let Command::Sim(command) = cli.command {
        return sim_cmd::run(command);
    }
    // Setup writes the config file --config names, and makes the data directory.
    if let Command::Setup(args) = cli.command {
        return setup_cmd::run(args, cli.config.as_deref(), cli.data_dir.as_deref());
    }
    // The benchmarks are another binary's (bench_binary.rs); they read no config.
    if let Command::Bench { args } = cli.command {
        return Err(bench_binary::exec(&["bench"], &args));
    }
    let config = config::Config::load(cli.config.as_deref())?;
    let data_dir_flag = cli.data_dir.clone();
    let data_dir = cli
        .data_dir
        .or_else(|| config.data_dir.clone())
        .unwrap_or_else(|| PathBuf::from(config::DATA_DIR_DEFAULT));
    let password_length_min = config
        .server
        .password_length_min
        .unwrap_or(directory::PASSWORD_LENGTH_MIN_DEFAULT);
    if password_length_min == 0 {
        anyhow::bail!("[server] password_length_min must be at least 1");
    }
    let paths = Paths {
        data_dir,
        directory_url: config.directory.url.clone(),
        password_length_min,
    };
    // Only `init` and `serve` make a data directory: a command run in the wrong folder must
    // say so, not leave an empty data directory behind and report an empty system.
    if cli.command.needs_data_dir() && !paths.data_dir.is_dir() {
        let shown = std::path::absolute(&paths.data_dir).unwrap_or(paths.data_dir.clone());
        anyhow::bail!(
            "no data directory at {} (give --data-dir or --config, or run `mailstow init` \
             to create one)",
            shown.display()
        );
    }
    // A newer build's directory is refused before any command opens, recovers or removes
    // anything in it.
    if !matches!(cli.command, Command::Config(_)) && paths.data_dir.is_dir() {
        data_format::check(&paths.data_dir)?;
    }
    if cli.command.needs_data_dir() {
        paths.check_writable()?;
    }
    match cli.command {
        Command::Config(command) => {
            config_cmd::run(command, cli.config.as_deref(), &paths, &config)
        }
        Command::Init => init(&paths, &config),
        Command::Serve(args) => serve_cmd::run(
            args,
            serve_cmd::Sources {
                config_file: cli.config.clone(),
                data_dir_flag: data_dir_flag.clone(),
            },
            &paths,
            &config,
        ),
        Command::Domain(command) => directory_cmd::domain(command, &paths),
        Command::User(command) => directory_cmd::user(command, &paths, &config),
        Command::Auth(command) => auth_cmd::run(command, &paths),
        Command::Acme(command) => acme_cmd::run(command, &paths),
        Command::Dkim(command) => dkim_cmd::run(command, &paths),
        Command::Dns(args) => dns_cmd::run(args, &paths, &config),
        Command::Sieve(command) => sieve_cmd::run(command, &paths, &config),
        Command::Spam(command) => spam_cmd::run(command, &paths),
        Command::Alias(command) => directory_cmd::alias(command, &paths),
        Command::Node(directory_cmd::NodeCommand::Replace { name }) => node_replace::run(
            &name,
            &paths,
            &config,
            cli.config.clone(),
            data_dir_flag.clone(),
        ),
        Command::Node(command) => directory_cmd::node(command, &paths),
        Command::Mailbox(command) => mailbox_cmd::run(command, &paths, &config),
        Command::Store(command) => store_cmd::run(command, &paths, &config),
        Command::Queue(command) => queue_cmd::run(command, &paths, &config),
        Command::Report(command) => report_cmd::run(command, &paths),
        Command::Backup(args) => backup_cmd::backup(args, &paths, &config, cli.config.as_deref()),
        Command::Restore { src } => backup_cmd::restore(&src, &paths, &config),
        Command::Fs(_) | Command::Sim(_) | Command::Bench { .. } | Command::Setup(_) => {
            unreachable!("handled above")
        }
    }
}

fn init(paths: &Paths, config: &config::Config) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let disk: std::sync::Arc<dyn disk::Disk> = std::sync::Arc::new(disk::RealDisk);
    for dir in [paths.queue(), paths.store()] {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let _lock = server::DataDirLock::acquire(&paths.data_dir)?;
    let (queue, queue_report) =
        queue::Queue::open(disk.clone(), &paths.queue(), config.queue_config())?;
    queue.close()?;
    let (store, store_report) = store::Store::open(disk, &paths.store(), config.store_config())?;
    drop(store);
    data_format::record(&paths.data_dir)?;
    out!("data directory: {}", paths.data_dir.display());
    out!(
        "queue: {} pending, {} deferred",
        queue_report.pending,
        queue_report.deferred
    );
    out!("store: {store_report}");
    Ok(())
}

/// Makes glibc's malloc give every freed large buffer back to the system at once.
///
/// By default glibc raises its mmap threshold to the size of each mapped block freed (up to
/// 32 MiB), and from then on serves buffers below it from its arenas, which keep them when
/// they are freed. The server's memory ceiling counts message bytes held (the `inflight`
/// budget), not what the allocator keeps: with the dynamic threshold, SMTP sessions that
/// grew buffers of a few MiB and then dropped them (refused over the budget) left 30-85 MiB
/// resident in arenas, depending on the order of growth and frees. A fixed threshold (which
/// also turns the dynamic adjustment off) maps every buffer of at least 1 MiB and unmaps it
/// when freed; smaller allocations are unaffected.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn return_large_buffers_to_the_system() {
    const MMAP_THRESHOLD: libc::c_int = 1 << 20;
    // SAFETY: `mallopt` only sets a parameter of the allocator (under its lock); it is
    // called first thing in `main`, before any other thread exists.
    let set = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
    debug_assert_eq!(set, 1, "mallopt(M_MMAP_THRESHOLD) refused");
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_large_buffers_to_the_system() {}

fn main() -> ExitCode {
    return_large_buffers_to_the_system();
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
            // One line, whatever a library put in its message.
            let message: Vec<String> = format!("{error:#}")
                .lines()
                .map(|l| l.trim().to_string())
                .collect();
            eprintln!("mailstow: error: {}", message.join(" "));
            ExitCode::FAILURE
        }
    }
}

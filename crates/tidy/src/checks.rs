//! The checks. Each failure names what to change: the code, or ARCHITECTURE.md if the change
//! is meant.

use std::collections::{BTreeMap, BTreeSet};

use crate::workspace::{Workspace, code, cycles, module_graph, root, sources};

/// The binary we ship.
const SHIPPED: &str = "mailstow";
/// Crates that are test or bench code: never in the shipped binary.
const NOT_SHIPPED: [&str; 3] = ["bench", "test-peers", "tidy"];
/// The sans-IO protocol crates, and what they must never depend on.
const PROTOCOLS: [&str; 5] = ["smtp", "pop3", "imap", "managesieve", "milter"];
const NOT_IN_PROTOCOLS: [&str; 5] = ["tokio", "store", "queue", "directory", "mailboxes"];
/// Configuration file parsers: the CLI's alone.
const CONFIG_PARSERS: [&str; 2] = ["toml", "clap"];

/// ARCHITECTURE.md's dependency map: the fenced block after the line
/// `<!-- tidy: dependencies -->`, one line per crate, `crate -> dep, dep, ...` (or `-> -`); an
/// indented line continues the list above it.
fn declared_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let marker = "<!-- tidy: dependencies -->";
    let at = text
        .find(marker)
        .expect("ARCHITECTURE.md has a `<!-- tidy: dependencies -->` block");
    let block = text[at + marker.len()..]
        .split("```")
        .nth(1)
        .expect("a fenced block after the marker");
    let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut last = None;
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (name, deps) = match line.split_once("->") {
            Some((name, deps)) => (name.trim().to_string(), deps),
            None if line.starts_with(' ') => (
                last.clone()
                    .unwrap_or_else(|| panic!("a continuation before any crate: {line:?}")),
                line,
            ),
            None => panic!("not `crate -> deps`: {line:?}"),
        };
        let deps = deps
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty() && *d != "-")
            .map(str::to_string);
        map.entry(name.clone()).or_default().extend(deps);
        last = Some(name);
    }
    map
}

#[test]
fn dependency_edges_are_the_ones_architecture_md_lists() {
    let workspace = Workspace::load();
    let declared = declared_dependencies();
    let mut wrong = Vec::new();
    for name in workspace.members.keys() {
        let actual = workspace.ours(name);
        match declared.get(name) {
            None => wrong.push(format!("{name} is not in ARCHITECTURE.md's dependency map")),
            Some(listed) if *listed != actual => {
                let extra: Vec<_> = actual.difference(listed).collect();
                let stale: Vec<_> = listed.difference(&actual).collect();
                wrong.push(format!(
                    "{name}: depends on {extra:?} not listed; listed {stale:?} not depended on"
                ));
            }
            Some(_) => {}
        }
    }
    for name in declared.keys() {
        if !workspace.members.contains_key(name) {
            wrong.push(format!(
                "ARCHITECTURE.md lists {name}, which is not a crate"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "change the code or ARCHITECTURE.md's map:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn protocol_crates_know_no_runtime_and_no_storage() {
    let workspace = Workspace::load();
    for protocol in PROTOCOLS {
        let closure = workspace.closure(protocol);
        for banned in NOT_IN_PROTOCOLS {
            assert!(
                !closure.contains(banned),
                "{protocol} depends (through its normal dependencies) on {banned}: protocol \
                 crates are sans-IO"
            );
        }
    }
}

#[test]
fn the_shipped_binary_links_no_test_or_bench_crate() {
    let workspace = Workspace::load();
    let closure = workspace.closure(SHIPPED);
    for crate_name in NOT_SHIPPED {
        assert!(
            !closure.contains(crate_name),
            "`cargo tree -p {SHIPPED} -e normal` shows {crate_name}"
        );
    }
}

#[test]
fn only_the_cli_reads_configuration_or_prints() {
    let workspace = Workspace::load();
    let shipped: BTreeSet<String> = workspace
        .closure(SHIPPED)
        .into_iter()
        .filter(|c| workspace.members.contains_key(c))
        .collect();
    let mut wrong = Vec::new();
    for name in &shipped {
        let member = &workspace.members[name];
        for parser in CONFIG_PARSERS {
            if member.normal.contains(parser) {
                wrong.push(format!(
                    "{name} depends on {parser}: only {SHIPPED} parses configuration"
                ));
            }
        }
        for (path, text) in sources(member) {
            let text = code(&text);
            for (n, line) in text.lines().enumerate() {
                for printing in ["println!(", "print!(", "eprintln!(", "eprint!(", "dbg!("] {
                    if line.contains(printing) {
                        wrong.push(format!("{}:{}: {printing}", path.display(), n + 1));
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "only {SHIPPED} reads configuration files or prints; the others report through return \
         values and `tracing`:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_crate_has_an_import_cycle_among_its_modules() {
    let workspace = Workspace::load();
    let mut wrong = Vec::new();
    for member in workspace.members.values() {
        for cycle in cycles(&module_graph(member)) {
            wrong.push(format!("{}: {}", member.name, cycle.join(" <-> ")));
        }
    }
    assert!(
        wrong.is_empty(),
        "modules that import each other (move what both need into a module of its own, or \
         pass it in):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
    .collect();
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"]]);
}

/// Crates whose durable state must go through `disk::Disk` (so power-cut tests cover it),
/// and the files allowed to touch `std::fs` anyway (state that need not survive a crash).
const DISK_SEAM: [(&str, &[&str]); 5] = [
    ("queue", &[]),
    ("store", &[]),
    ("mailboxes", &[]),
    ("cluster", &[]),
    // The operator's `stats` file, rewritten every few seconds.
    ("mailfs", &["fs/background.rs"]),
];

#[test]
fn the_engines_do_durable_io_through_the_disk_trait() {
    let workspace = Workspace::load();
    let mut wrong = Vec::new();
    for (name, allowed) in DISK_SEAM {
        let member = &workspace.members[name];
        for (path, text) in sources(member) {
            let relative = path.strip_prefix(member.dir.join("src")).unwrap_or(&path);
            if allowed.iter().any(|a| relative == std::path::Path::new(a)) {
                continue;
            }
            if code(&text).contains("std::fs") {
                wrong.push(path.display().to_string());
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "durable I/O outside `disk::Disk` (no simulated power cut covers it):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_delivered_line_is_written_in_one_place() {
    let workspace = Workspace::load();
    let mut callers = BTreeSet::new();
    for member in workspace.members.values().filter(|m| m.name != "tidy") {
        for (path, text) in sources(member) {
            let text = code(&text);
            if [".delivered_local(", ".delivered_handed_over("]
                .iter()
                .any(|call| text.contains(call))
            {
                let relative = path.strip_prefix(root()).unwrap_or(&path).to_path_buf();
                callers.insert(relative.display().to_string());
            }
        }
    }
    assert_eq!(
        callers,
        BTreeSet::from(["crates/mailboxes/src/deposit.rs".to_string()]),
        "new mail is logged `delivered` only by the one road into the store"
    );
}

#[test]
fn protocol_crates_read_no_clock() {
    let workspace = Workspace::load();
    let mut wrong = Vec::new();
    for protocol in PROTOCOLS {
        for (path, text) in sources(&workspace.members[protocol]) {
            for (n, line) in code(&text).lines().enumerate() {
                if ["SystemTime::now", "Instant::now", "Utc::now", "Local::now"]
                    .iter()
                    .any(|clock| line.contains(clock))
                {
                    wrong.push(format!("{}:{}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a protocol session reads no clock; the shell passes time in:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_crate_of_the_mail_server_that_logs_writes_the_mail_log() {
    let workspace = Workspace::load();
    let logging = std::fs::read_to_string(root().join("crates/mailstow/src/logging.rs"))
        .expect("the binary's logging");
    let listed = logging
        .split("const OUR_CRATES")
        .nth(1)
        .and_then(|rest| rest.split('[').nth(2))
        .and_then(|rest| rest.split(']').next())
        .expect("OUR_CRATES in crates/mailstow/src/logging.rs");
    let listed: BTreeSet<String> = listed
        .split(',')
        .map(|n| n.trim().trim_matches('"').to_string())
        .filter(|n| !n.is_empty())
        .collect();
    let mut server: BTreeSet<String> = workspace.closure("server");
    server.insert("server".into());
    server.insert(SHIPPED.into());
    let missing: Vec<String> = server
        .into_iter()
        .filter(|c| {
            workspace
                .members
                .get(c)
                .is_some_and(|m| m.normal.contains("tracing"))
        })
        .map(|c| c.replace('-', "_"))
        .filter(|c| !listed.contains(c))
        .collect();
    assert!(
        missing.is_empty(),
        "crates of the mail server whose `info` lines would not be the mail log (add them to \
         OUR_CRATES in crates/mailstow/src/logging.rs): {missing:?}"
    );
}

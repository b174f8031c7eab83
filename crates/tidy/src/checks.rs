//! The checks. Each failure names what to change: the code, or ARCHITECTURE.md if the change
//! is meant.

use std::collections::{BTreeMap, BTreeSet};

use crate::workspace::{Workspace, code, cycles, module_graph, root, sources};

/// The binary we ship.
const SHIPPED: &str = "mailstow";
/// Crates that are test or bench code: never in the shipped binary.
const NOT_SHIPPED: [&str; 3] = ["bench", "test-peers", "tidy"];
/// The sans-IO protocol crates, and what they must never depend on.
const PROTOCOLS: [&str; 3] = ["smtp", "pop3", "imap"];
const NOT_IN_PROTOCOLS: [&str; 5] = ["tokio", "store", "queue", "directory", "mailboxes"];
/// Configuration file parsers: the CLI's alone.
const CONFIG_PARSERS: [&str; 2] = ["toml", "clap"];

/// ARCHITECTURE.md's dependency map: the fenced block after the line
/// `<!-- tidy: dependencies -->`, one line per crate, `crate -> dep, dep, ...` (or `-> -`).
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
    let mut map = BTreeMap::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (name, deps) = line
            .split_once("->")
            .unwrap_or_else(|| panic!("not `crate -> deps`: {line:?}"));
        let deps = deps
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty() && *d != "-")
            .map(str::to_string)
            .collect();
        map.insert(name.trim().to_string(), deps);
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

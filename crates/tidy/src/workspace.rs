//! What the checks read: the workspace's crates and their dependencies (from `cargo
//! metadata`), the sources of a crate, and the module graph of a crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The repository's root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/tidy is two levels below the root")
        .to_path_buf()
}

/// One crate of the workspace.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    /// Normal dependencies (not dev, not build) by package name.
    pub(crate) normal: BTreeSet<String>,
}

/// The workspace's members and, for every package in the build (ours and crates.io's), its
/// normal dependencies: what `cargo metadata` says.
pub(crate) struct Workspace {
    pub(crate) members: BTreeMap<String, Member>,
    /// Package name -> its normal dependencies' names, for every package resolved.
    pub(crate) resolved: BTreeMap<String, BTreeSet<String>>,
}

impl Workspace {
    pub(crate) fn load() -> Workspace {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = std::process::Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--locked"])
            .current_dir(root())
            .output()
            .expect("running cargo metadata");
        assert!(
            out.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("its JSON");
        let ids: BTreeSet<&str> = meta["workspace_members"]
            .as_array()
            .expect("workspace_members")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        let mut names_by_id = BTreeMap::new();
        let mut members = BTreeMap::new();
        for package in meta["packages"].as_array().expect("packages") {
            let name = package["name"].as_str().expect("name").to_string();
            let id = package["id"].as_str().expect("id");
            names_by_id.insert(id.to_string(), name.clone());
            if !ids.contains(id) {
                continue;
            }
            let normal = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str().map(str::to_string))
                .collect();
            let manifest = PathBuf::from(package["manifest_path"].as_str().expect("manifest"));
            let dir = manifest.parent().expect("its directory").to_path_buf();
            members.insert(name.clone(), Member { name, dir, normal });
        }
        let mut resolved = BTreeMap::new();
        for node in meta["resolve"]["nodes"].as_array().expect("resolve") {
            let name = names_by_id[node["id"].as_str().expect("id")].clone();
            let deps = node["deps"]
                .as_array()
                .expect("deps")
                .iter()
                .filter(|d| {
                    d["dep_kinds"]
                        .as_array()
                        .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()))
                })
                .map(|d| names_by_id[d["pkg"].as_str().expect("pkg")].clone())
                .collect::<BTreeSet<_>>();
            resolved
                .entry(name)
                .or_insert_with(BTreeSet::new)
                .extend(deps);
        }
        Workspace { members, resolved }
    }

    /// Every package `name` needs to build, itself excluded, through normal dependencies.
    pub(crate) fn closure(&self, name: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut next = vec![name.to_string()];
        while let Some(package) = next.pop() {
            for dep in self.resolved.get(&package).into_iter().flatten() {
                if seen.insert(dep.clone()) {
                    next.push(dep.clone());
                }
            }
        }
        seen
    }

    /// Our crates `name` depends on directly (normal dependencies).
    pub(crate) fn ours(&self, name: &str) -> BTreeSet<String> {
        self.members[name]
            .normal
            .iter()
            .filter(|dep| self.members.contains_key(*dep))
            .cloned()
            .collect()
    }
}

/// The Rust sources of a crate's library or binary (`src/`), without what follows a file's
/// first `#[cfg(test)]` (by this workspace's habit its tests module, at the end) and without
/// files in `tests` directories or named `tests.rs`.
pub(crate) fn sources(member: &Member) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut dirs = vec![member.dir.join("src")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "tests" {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                let text = std::fs::read_to_string(&path).expect("a source file");
                out.push((path, without_tests(&text)));
            }
        }
    }
    out.sort();
    out
}

/// `text` without its test code: a `#[cfg(test)]` item is left out whole (a `mod x;` line, or
/// an item with a body, to its closing brace), so test helpers anywhere in a file are skipped
/// and the code after them is still read.
fn without_tests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        // Skip the item: up to a `;` ending a braceless one, or its braces closing.
        let mut depth = 0i64;
        let mut opened = false;
        for item in lines.by_ref() {
            let code = code(item);
            depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            opened |= code.contains('{');
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    out
}

/// Text without `//` comments (so a doc comment naming a macro or a path is not code).
pub(crate) fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A crate's module graph: its root (`lib.rs` or `main.rs`, as `<root>`) and its top-level
/// modules (a directory module with all its files is one node), with an edge from each to
/// every other it names through `crate::`. The root's edges are the modules its own code
/// uses (not its `mod` and `use` lines, which only declare and re-export).
pub(crate) fn module_graph(member: &Member) -> BTreeMap<String, BTreeSet<String>> {
    let src = member.dir.join("src");
    let root = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|p| p.exists());
    let Some(root) = root else {
        return BTreeMap::new();
    };
    let root_text = code(&without_tests(
        &std::fs::read_to_string(&root).expect("the crate root"),
    ));
    // Statements, so that a `use` wrapped over several lines reads as one.
    let root_statements = statements(&root_text);
    let modules: BTreeSet<String> = root_text
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub(crate) mod ")
                .or_else(|| line.strip_prefix("pub mod "))
                .or_else(|| line.strip_prefix("mod "))?;
            rest.strip_suffix(';').map(|m| m.trim().to_string())
        })
        .collect();
    // `use module::{A, B};` and `pub use module::A;` in the root: `crate::A` (re-exported)
    // means that module, and the root's own code naming `A` uses it.
    let mut imported = BTreeMap::new();
    let mut reexported = BTreeMap::new();
    for statement in &root_statements {
        let (public, rest) = match statement
            .strip_prefix("pub use ")
            .or_else(|| statement.strip_prefix("pub(crate) use "))
        {
            Some(rest) => (true, rest),
            None => match statement.strip_prefix("use ") {
                Some(rest) => (false, rest),
                None => continue,
            },
        };
        let rest = rest
            .trim_start_matches("crate::")
            .trim_start_matches("self::");
        let Some((module, items)) = rest.trim_end_matches(';').split_once("::") else {
            continue;
        };
        if !modules.contains(module) {
            continue;
        }
        for item in items.trim_matches(['{', '}', ' ']).split(',') {
            let item = item.split(" as ").last().unwrap_or("").trim();
            let item = item.rsplit("::").next().unwrap_or("").trim();
            if item.is_empty() || item == "*" || item == "self" {
                continue;
            }
            imported.insert(item.to_string(), module.to_string());
            if public {
                reexported.insert(item.to_string(), module.to_string());
            }
        }
    }
    let node_of = |segment: &str| -> String {
        if modules.contains(segment) {
            segment.to_string()
        } else if let Some(module) = reexported.get(segment) {
            module.clone()
        } else {
            "<root>".to_string()
        }
    };
    let mut graph = BTreeMap::new();
    for module in &modules {
        let mut files = Vec::new();
        let file = src.join(format!("{module}.rs"));
        if file.exists() {
            files.push(file);
        }
        let dir = src.join(module);
        if dir.is_dir() {
            let mut dirs = vec![dir];
            while let Some(d) = dirs.pop() {
                for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                    let path = entry.path();
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if path.is_dir() && name != "tests" {
                        dirs.push(path);
                    } else if name.ends_with(".rs") && name != "tests.rs" {
                        files.push(path);
                    }
                }
            }
        }
        let mut edges = BTreeSet::new();
        for file in files {
            let text = code(&without_tests(
                &std::fs::read_to_string(&file).expect("a module file"),
            ));
            for segment in crate_paths(&text) {
                edges.insert(node_of(&segment));
            }
            // In a file directly under src/, `super::` is the crate root.
            if file.parent() == Some(src.as_path()) {
                for segment in relative_paths(&text, "super::") {
                    edges.insert(node_of(&segment));
                }
            }
        }
        edges.remove(module);
        graph.insert(module.clone(), edges);
    }
    let mut root_edges = BTreeSet::new();
    for statement in &root_statements {
        if [
            "mod ",
            "pub mod ",
            "pub(crate) mod ",
            "use ",
            "pub use ",
            "pub(crate) use ",
        ]
        .iter()
        .any(|p| statement.starts_with(p))
        {
            continue;
        }
        for module in &modules {
            if contains_path(statement, module) {
                root_edges.insert(module.clone());
            }
        }
        for (name, module) in &imported {
            if contains_word(statement, name) {
                root_edges.insert(module.clone());
            }
        }
    }
    graph.insert("<root>".to_string(), root_edges);
    graph
}

/// `text` cut into statements: at every `;` and every `{` or `}` (so a `use` wrapped over
/// several lines is one, and an item's header is one), trimmed.
fn statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(if c == '\n' { ' ' } else { c });
        if matches!(c, ';' | '{' | '}') {
            let statement = current.split_whitespace().collect::<Vec<_>>().join(" ");
            if !statement.is_empty() {
                out.push(statement);
            }
            current.clear();
        }
    }
    out
}

/// Whether `text` names `word` as a whole identifier.
fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !part(before) && !part(after)
    })
}

/// The first segment of every `crate::` path in `text`, grouped imports included.
fn crate_paths(text: &str) -> BTreeSet<String> {
    relative_paths(text, "crate::")
}

/// The first segment of every path in `text` that starts with `prefix` (`crate::`, `super::`),
/// grouped imports included.
fn relative_paths(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            rest = after;
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let segment = part.trim().split("::").next().unwrap_or("").trim();
                if !segment.is_empty() {
                    out.insert(segment.to_string());
                }
            }
        } else {
            let segment: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !segment.is_empty() && segment != "super" {
                out.insert(segment);
            } else if after.starts_with('*') {
                out.insert("*".to_string());
            }
        }
        rest = after;
    }
    out
}

/// Whether `line` uses `module::` as a path (not as the tail of a longer name).
fn contains_path(line: &str, module: &str) -> bool {
    let needle = format!("{module}::");
    line.match_indices(&needle).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

/// The cycles of a graph: each strongly connected set of two or more nodes.
pub(crate) fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iterative over a small graph.
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let Some((w, _)) = s.graph.get_key_value(w.as_str()) else {
                continue;
            };
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.found
}

//! No import cycles between the modules of any crate in the workspace.
//!
//! Each source file is a module. A module depends on another when it names one of its items
//! through a `crate::`, `super::` or `self::` path (in a `use` or anywhere in the code).
//! Test-only code (`#[cfg(test)]`) is left out, and so are edges between a module and its own
//! ancestors or descendants: a parent declares and re-exports its children, and a child may
//! use what its parent holds. A cycle among the rest means two files each need the other;
//! the cure is a module of their own for what they share.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

type ModPath = Vec<String>;

/// Every `.rs` file under `src`, by module path (`lib.rs`, `main.rs` and `mod.rs` name their
/// folder's module).
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src");
            let mut parts: ModPath = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("lib" | "main" | "mod")
            ) {
                parts.pop();
            }
            out.insert(parts, path);
        }
    }
    out
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// The `crate`/`super`/`self` paths one file names, each made absolute.
struct Paths {
    /// The module the visitor is in (the file's, plus inline modules).
    here: ModPath,
    found: Vec<ModPath>,
}

impl Paths {
    fn absolute(&self, segments: &[String]) -> Option<ModPath> {
        let mut base = match segments.first()?.as_str() {
            "crate" => Vec::new(),
            "self" | "super" => self.here.clone(),
            _ => return None,
        };
        let mut rest = &segments[usize::from(segments[0] != "super")..];
        while let Some(first) = rest.first() {
            match first.as_str() {
                "super" => {
                    base.pop()?;
                }
                "self" => {}
                _ => break,
            }
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn add(&mut self, segments: Vec<String>) {
        if let Some(path) = self.absolute(&segments) {
            self.found.push(path);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                self.add(full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.add(full);
            }
            syn::UseTree::Glob(_) => self.add(prefix.clone()),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Struct(s) => &s.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if is_test_only(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.here.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.here.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            self.add(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }
}

/// The module graph of one crate: for each module, the other modules it names.
fn graph(files: &BTreeMap<ModPath, String>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut edges = BTreeMap::new();
    for (module, source) in files {
        let file = syn::parse_file(source).unwrap_or_else(|e| panic!("{module:?}: {e}"));
        let mut paths = Paths {
            here: module.clone(),
            found: Vec::new(),
        };
        paths.visit_file(&file);
        let mut to = BTreeSet::new();
        for path in paths.found {
            // The longest prefix of the path that is a file of this crate.
            let Some(target) = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| files.contains_key(p))
            else {
                continue;
            };
            let related = target.starts_with(module) || module.starts_with(&target);
            if !related {
                to.insert(target);
            }
        }
        edges.insert(module.clone(), to);
    }
    edges
}

/// Strongly connected components with more than one module (Tarjan's algorithm).
fn cycles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    fn connect<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.edges[v] {
            if !s.index.contains_key(w) {
                connect(s, w);
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
                component.push(w.clone());
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
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            connect(&mut s, v);
        }
    }
    s.found
}

fn name(module: &ModPath) -> String {
    if module.is_empty() {
        "<root>".into()
    } else {
        module.join("/")
    }
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    let mut report = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .expect("the crates folder")
        .map(|e| e.expect("an entry").path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    dirs.sort();
    for src in dirs {
        let files: BTreeMap<ModPath, String> = modules(&src)
            .into_iter()
            .map(|(m, path)| {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                (m, text)
            })
            .collect();
        checked += files.len();
        let edges = graph(&files);
        for cycle in cycles(&edges) {
            let members: Vec<String> = cycle.iter().map(name).collect();
            let links: Vec<String> = cycle
                .iter()
                .flat_map(|a| {
                    edges[a]
                        .iter()
                        .filter(|b| cycle.contains(b))
                        .map(move |b| format!("{} -> {}", name(a), name(b)))
                })
                .collect();
            report.push(format!(
                "{}: {} ({})",
                src.display(),
                members.join(", "),
                links.join("; ")
            ));
        }
    }
    assert!(
        checked > 100,
        "only {checked} source files found under {}",
        crates.display()
    );
    assert!(report.is_empty(), "import cycles:\n{}", report.join("\n"));
}

fn crate_of(files: &[(&str, &str)]) -> BTreeMap<ModPath, String> {
    files
        .iter()
        .map(|(m, text)| {
            let path = if m.is_empty() {
                Vec::new()
            } else {
                m.split('/').map(String::from).collect()
            };
            (path, text.to_string())
        })
        .collect()
}

#[test]
fn the_check_finds_a_cycle_through_use_and_through_a_path() {
    let files = crate_of(&[
        ("", "mod a; mod b; mod c;"),
        ("a", "use crate::b::Thing; pub struct Other;"),
        (
            "b",
            "pub struct Thing; fn f() -> super::a::Other { crate::a::Other }",
        ),
        ("c", "use crate::{a::Other, b::Thing};"),
    ]);
    let found = cycles(&graph(&files));
    assert_eq!(
        found,
        vec![vec![vec!["a".to_string()], vec!["b".to_string()]]]
    );
}

#[test]
fn the_check_leaves_out_parents_children_and_tests() {
    let files = crate_of(&[
        ("", "mod g; pub use g::X;"),
        ("g", "mod x; mod y; pub use x::X; pub struct Shared;"),
        ("g/x", "use super::Shared; pub struct X;"),
        (
            "g/y",
            "use super::x::X; #[cfg(test)] mod tests { use crate::g::y::Y; }",
        ),
    ]);
    let edges = graph(&files);
    assert!(cycles(&edges).is_empty());
    let y = vec!["g".to_string(), "y".to_string()];
    let x = vec!["g".to_string(), "x".to_string()];
    assert_eq!(edges[&y], BTreeSet::from([x]));
}

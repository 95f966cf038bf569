//! The root crate's top-level modules form layers without cycles: surfaces (`cli`, `mcp`,
//! `serve`) use services, services use the store and the registry, and small utilities are
//! leaves. Read from the source: a module depends on another where it names `crate::other`
//! (outside its tests), or uses one of the macros the other exports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crate's macros, by the module that defines them.
const MACROS: [(&str, &str); 2] = [("say!", "output"), ("say_err!", "output")];

fn sources(path: &Path) -> Vec<PathBuf> {
    if path.is_dir() {
        let mut all = Vec::new();
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            all.extend(sources(&entry.path()));
        }
        all
    } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        vec![path.to_path_buf()]
    } else {
        Vec::new()
    }
}

/// Top-level module → the top-level modules it uses.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules: BTreeSet<String> = std::fs::read_dir(&src)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut graph = BTreeMap::new();
    for module in &modules {
        let mut uses = BTreeSet::new();
        let file = src.join(format!("{module}.rs"));
        let dir = src.join(module);
        let files = [sources(&file), sources(&dir)].concat();
        assert!(!files.is_empty(), "no source for {module}");
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests may reach anywhere.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (at, _) in code.match_indices("crate::") {
                let name: String = code[at + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if modules.contains(&name) && &name != module {
                    uses.insert(name);
                }
            }
            for (mac, owner) in MACROS {
                if code.contains(mac) && owner != module {
                    uses.insert(owner.to_string());
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// A cycle through `from`, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        let here = path.last()?.clone();
        for next in graph.get(&here).into_iter().flatten() {
            if next == &path[0] {
                return Some(path.clone());
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if let Some(found) = walk(graph, path, seen) {
                    return Some(found);
                }
                path.pop();
            }
        }
        None
    }
    walk(graph, &mut vec![from.to_string()], &mut BTreeSet::new())
}

#[test]
fn top_level_modules_form_no_cycle() {
    let graph = graph();
    assert!(graph.len() > 10, "the source was not read: {graph:?}");
    assert!(
        graph["cli"].contains("change"),
        "a known edge is missing: the reader is broken"
    );
    for module in graph.keys() {
        if let Some(found) = cycle(&graph, module) {
            panic!("modules form a cycle: {} -> {module}", found.join(" -> "));
        }
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    graph.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    graph.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycle(&graph, "a").unwrap(), ["a", "b", "c"]);
    graph.insert("c".to_string(), BTreeSet::new());
    assert!(cycle(&graph, "a").is_none());
}

#[test]
fn utilities_are_leaves() {
    let graph = graph();
    for leaf in ["util", "output", "logging", "search"] {
        assert!(graph[leaf].is_empty(), "{leaf} uses {:?}", graph[leaf]);
    }
}

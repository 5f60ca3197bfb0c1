//! The source tree's layers: code in one top-level module of `src/` may use only the
//! modules below it, so that the layers read bottom up and nothing forms a cycle. A new
//! module, or an import that points up, fails here with the file and the line.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The top-level modules, bottom up; a module may use those of a lower rank.
const LAYERS: &[(&str, u8)] = &[
    ("error", 0),
    ("util", 1),
    ("config", 2),
    ("protocol", 2),
    ("holds", 2),
    ("transport", 3),
    ("services", 4),
    ("client_core", 5),
    ("locks", 6),
    ("groups", 7),
    ("sync", 7),
    ("client", 8),
    // Documentation only.
    ("operations", 9),
];

fn rank(module: &str) -> Option<u8> {
    LAYERS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|(_, rank)| *rank)
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// Every `crate::<module>` a line of code names (comments left out: doc links may point
/// anywhere), including those inside `use crate::{a, b}` groups.
fn modules_named(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut named = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            named.extend(inner.split(',').map(|item| leading_name(item.trim())));
        } else {
            named.push(leading_name(rest));
        }
    }
    named.retain(|name| !name.is_empty());
    named
}

fn leading_name(path: &str) -> String {
    path.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src/");
        let Some(top) = relative.iter().next().and_then(|part| part.to_str()) else {
            continue;
        };
        let top = top.trim_end_matches(".rs");
        if top == "lib" {
            continue;
        }
        let own = rank(top).unwrap_or_else(|| {
            panic!("src/{top} is in no layer: add it to LAYERS in tests/programs/layering.rs")
        });
        *seen.entry(top.to_string()).or_default() += 1;
        let text = fs::read_to_string(file).expect("a readable source file");
        for (number, line) in text.lines().enumerate() {
            for used in modules_named(line) {
                if used == top {
                    continue;
                }
                match rank(&used) {
                    Some(theirs) if theirs < own => {}
                    Some(_) => upward.push(format!(
                        "src/{}:{}: `{top}` uses `{used}`, which is not below it",
                        relative.display(),
                        number + 1
                    )),
                    // Root re-exports (`crate::Error`) would hide which layer is used.
                    None => upward.push(format!(
                        "src/{}:{}: `crate::{used}` is not a layer; name the module",
                        relative.display(),
                        number + 1
                    )),
                }
            }
        }
    }
    assert!(upward.is_empty(), "{}", upward.join("\n"));
    assert_eq!(seen.len(), LAYERS.len(), "every layer has code: {seen:?}");
}

#[test]
fn the_parser_sees_grouped_and_plain_imports() {
    assert_eq!(
        modules_named("use crate::{holds::Holds, util::sync};"),
        ["holds", "util"]
    );
    assert_eq!(
        modules_named("    let x = crate::util::time::millis(d); // crate::client"),
        ["util"]
    );
    assert!(modules_named("/// see [`Client`](crate::Client)").is_empty());
}

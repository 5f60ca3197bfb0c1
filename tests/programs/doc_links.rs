//! Every relative link in the Markdown files at the repository's root (and the README of
//! each part of the workspace that has one) points somewhere: a
//! `[text](path)` (or a `[label]: path` definition) names a file or folder that exists, and
//! a `#anchor` on a Markdown file (or alone, for the file itself) names one of its headings,
//! slugged as GitHub slugs them. Links with a scheme (`https://…`) and rustdoc intra-doc
//! links (`crate::Client`) are left alone: `cargo doc` checks the latter.
//!
//! Needs no Redis.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The repository's root, where the Markdown files live.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files at the root and the parts' READMEs, sorted.
fn markdown_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root())
        .expect("read the repository's root")
        .map(|entry| entry.expect("a root entry").path())
        .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    // The guides of the workspace's other parts.
    for dir in ["benches", "interop", "rlock", "testkit", "torture"] {
        let readme = root().join(dir).join("README.md");
        if readme.is_file() {
            files.push(readme);
        }
    }
    files.sort();
    files
}

/// Whether `line` opens or closes a fenced code block, and with which fence.
fn fence(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    ["```", "~~~"]
        .into_iter()
        .find(|fence| trimmed.starts_with(fence))
}

/// The document with fenced code blocks blanked out (lines kept, so that nothing in code is
/// taken for a link or a heading).
fn without_code_blocks(text: &str) -> Vec<&str> {
    let mut open: Option<&str> = None;
    text.lines()
        .map(|line| match (open, fence(line)) {
            (None, Some(f)) => {
                open = Some(f);
                ""
            }
            (Some(o), Some(f)) if f == o => {
                open = None;
                ""
            }
            (Some(_), _) => "",
            (None, None) => line,
        })
        .collect()
}

/// `text` without its inline code spans: a run of N backticks up to the next run of exactly
/// N. An unmatched run is kept as it is.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = run_at(i);
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let other = run_at(j);
                if other == run {
                    close = Some(j + other);
                    break;
                }
                j += other;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.push(' ');
                i = end;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The targets of the inline links `[text](target)` and images in `text`, and of the
/// reference definitions `[label]: target`, code left out.
fn link_targets(text: &str) -> Vec<String> {
    let lines = without_code_blocks(text);
    let mut targets = Vec::new();
    for line in &lines {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() <= 3 && trimmed.starts_with('[') {
            if let Some((label, rest)) = trimmed[1..].split_once("]:") {
                if !label.is_empty() && !label.contains('[') {
                    if let Some(target) = rest.split_whitespace().next() {
                        targets.push(strip_angles(target).to_string());
                    }
                }
            }
        }
    }
    let prose = without_code_spans(&lines.join("\n"));
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                ')' => depth -= 1,
                // A destination does not run over a line.
                '\n' => break,
                _ => {}
            }
        }
        if let Some(end) = end {
            let inside = after[..end].trim();
            // A title may follow the destination: `(path "title")`.
            let target = inside.split_whitespace().next().unwrap_or("");
            targets.push(strip_angles(target).to_string());
            rest = &after[end..];
        } else {
            rest = after;
        }
    }
    targets
}

fn strip_angles(target: &str) -> &str {
    target
        .strip_prefix('<')
        .and_then(|t| t.strip_suffix('>'))
        .unwrap_or(target)
}

/// Heading text as GitHub renders it for its anchor: links become their text, and code and
/// emphasis marks go.
fn rendered(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[text](url)` → `text`.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.split_once("](") {
            Some((label, tail)) if !label.contains('[') => match tail.find(')') {
                Some(close) => {
                    text.push_str(label);
                    rest = &tail[close + 1..];
                }
                None => {
                    text.push('[');
                    rest = after;
                }
            },
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.replace(['`', '*'], "")
}

/// GitHub's anchor for a heading: lower case, every character that is not a letter, a
/// digit, `-`, `_` or a space dropped, and each space turned into `-`.
fn slug(heading: &str) -> String {
    rendered(heading)
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of every heading of a Markdown document, as GitHub makes them (a repeated
/// slug gets `-1`, `-2`, … after the first).
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for line in without_code_blocks(text) {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() > 3 {
            continue;
        }
        let level = trimmed.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&level) {
            continue;
        }
        let rest = &trimmed[level..];
        if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
            continue;
        }
        // A closing run of `#` is not part of the heading.
        let text = rest.trim().trim_end_matches('#').trim_end();
        let base = slug(text);
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// Whether `target` is for rustdoc or the web rather than a path in the repository.
fn is_not_a_path(target: &str) -> bool {
    let path = target.split('#').next().unwrap_or("");
    target.contains("://")
        || target.starts_with("mailto:")
        || path.contains("::")
        || matches!(path, "crate" | "self" | "super")
}

/// What is wrong with the link to `target` from the Markdown file `from`, if anything.
fn check(from: &Path, target: &str) -> Option<String> {
    if target.is_empty() {
        return Some("an empty link".into());
    }
    if is_not_a_path(target) {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        from.to_path_buf()
    } else if let Some(from_root) = path.strip_prefix('/') {
        root().join(from_root)
    } else {
        from.parent().expect("a file's folder").join(path)
    };
    if !file.exists() {
        return Some(format!(
            "`{target}`: no file or folder at {}",
            file.display()
        ));
    }
    let anchor = anchor?;
    if !matches!(file.extension(), Some(ext) if ext == "md") {
        return None;
    }
    let text = std::fs::read_to_string(&file).expect("read a linked Markdown file");
    if anchors(&text).contains(anchor) {
        None
    } else {
        let mut known: Vec<String> = anchors(&text).into_iter().collect();
        known.sort();
        Some(format!(
            "`{target}`: no heading with the anchor `{anchor}` in {} (anchors: {})",
            file.display(),
            known.join(", ")
        ))
    }
}

#[test]
fn every_relative_link_in_the_root_markdown_files_resolves() {
    let files = markdown_files();
    assert!(
        files.iter().any(|f| f.ends_with("README.md")),
        "no README.md among {files:?}"
    );
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a Markdown file");
        for target in link_targets(&text) {
            checked += 1;
            if let Some(problem) = check(file, &target) {
                let name = file.file_name().expect("a file name").to_string_lossy();
                broken.push(format!("{name}: {problem}"));
            }
        }
    }
    assert!(checked > 0, "no links found at all: is the parser broken?");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn headings_slug_as_on_github() {
    assert_eq!(slug("The torture run"), "the-torture-run");
    assert_eq!(slug("W1: one task, one key"), "w1-one-task-one-key");
    assert_eq!(slug("`RedLock` and `MultiLock`"), "redlock-and-multilock");
    assert_eq!(
        slug("Which primitive should I use?"),
        "which-primitive-should-i-use"
    );
    assert_eq!(slug("[Unreleased]"), "unreleased");
    assert_eq!(slug("[0.1.0]"), "010");
    assert_eq!(
        slug("A [linked](https://example.com) title"),
        "a-linked-title"
    );
    assert_eq!(
        slug("snake_case and  two spaces"),
        "snake_case-and--two-spaces"
    );
    let doc = "# Title\n## Part\n```\n## Not a heading\n```\n## Part\n#nope\n### Closed ###\n";
    let found = anchors(doc);
    let mut found: Vec<&str> = found.iter().map(String::as_str).collect();
    found.sort();
    assert_eq!(found, ["closed", "part", "part-1", "title"]);
}

#[test]
fn links_are_found_outside_code_only() {
    let doc = "See [the guide](GUIDE.md#start) and ![a](img/a.png \"title\").\n\
               `[not](a-link.md)` and [`Client`](crate::Client).\n\
               ```\n[in](code.md)\n```\n\
               [a link over\ntwo lines](TWO.md)\n\
               [label]: <REF.md>\n";
    assert_eq!(
        link_targets(doc),
        [
            "REF.md",
            "GUIDE.md#start",
            "img/a.png",
            "crate::Client",
            "TWO.md"
        ]
    );
    assert!(is_not_a_path("crate::Client"));
    assert!(is_not_a_path("crate#security"));
    assert!(is_not_a_path("https://keepachangelog.com/en/1.1.0/"));
    assert!(!is_not_a_path("TESTING.md#the-torture-run"));
}

/// The folders at the repository's root that doc comments quote paths under.
const TOP_FOLDERS: &[&str] = &[
    "src/",
    "lua/",
    "tests/",
    "examples/",
    "benches/",
    "interop/",
    "rlock/",
    "torture/",
    "testkit/",
    ".ci/",
];

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder is readable") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name == "target") {
                continue;
            }
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The folder of the crate `file` belongs to: the nearest one above it with a Cargo.toml.
fn crate_root(file: &Path) -> PathBuf {
    file.ancestors()
        .skip(1)
        .find(|dir| dir.join("Cargo.toml").is_file())
        .unwrap_or(&root())
        .to_path_buf()
}

/// The repository paths a doc comment line quotes in backticks (`` `lua/acquire.lua` ``):
/// a code span that starts with a top-level folder and holds no space. A span with a glob
/// (`permit_*.lua`) or a placeholder (`<name>`) is no one path, and a build output (under a
/// `target/` folder) is not in a fresh checkout: both are left alone.
fn quoted_paths(doc: &str) -> Vec<&str> {
    doc.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| TOP_FOLDERS.iter().any(|top| span.starts_with(top)))
        .filter(|span| !span.contains([' ', '*', '<', '{', '$']))
        // Build outputs exist only after a build: not a path a fresh checkout has.
        .filter(|span| !span.contains("/target/"))
        .collect()
}

/// Paths quoted in rustdoc (`//!` and `///` comments) name files and folders that exist:
/// a file that moved leaves no doc pointing at its old place.
#[test]
fn every_path_quoted_in_rustdoc_exists() {
    let mut files = Vec::new();
    for dir in [
        "src",
        "tests",
        "testkit/src",
        "torture/src",
        "rlock/src",
        "interop/src",
    ] {
        rust_files(&root().join(dir), &mut files);
    }
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a source file");
        for (number, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            let Some(doc) = trimmed
                .strip_prefix("//!")
                .or_else(|| trimmed.strip_prefix("///"))
            else {
                continue;
            };
            for path in quoted_paths(doc) {
                checked += 1;
                let path = path.trim_end_matches([':', ',', '.']);
                // From the repository's root, or from the file's own crate (a workspace
                // member's docs name its files from its folder).
                if !root().join(path).exists() && !crate_root(file).join(path).exists() {
                    let relative = file.strip_prefix(root()).unwrap_or(file);
                    missing.push(format!("{}:{}: `{path}`", relative.display(), number + 1));
                }
            }
        }
    }
    assert!(
        checked > 0,
        "no quoted path found at all: is the scan broken?"
    );
    assert!(
        missing.is_empty(),
        "paths quoted in rustdoc that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn quoted_paths_are_whole_paths_only() {
    assert_eq!(
        quoted_paths(" see `lua/acquire.lua` and `tests/programs/layering.rs`."),
        ["lua/acquire.lua", "tests/programs/layering.rs"]
    );
    assert!(quoted_paths(" `lua/permit_*.lua`, `src/<layer>/`, `cargo test`").is_empty());
    assert!(quoted_paths(" `interop/redisson/target/redisson-driver.jar`").is_empty());
}

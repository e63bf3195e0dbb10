//! The user's documents: the book's reference pages are what the code generates (as
//! `schema/scenario.schema.json` is what `tracefault schema` prints), every page is in the
//! book's table of contents, every relative link and anchor in the README, the book and the
//! top-level documents resolves, and the README stays a few screens long.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::root;

/// The reference pages are current; `TRACEFAULT_BLESS=1` rewrites them.
#[test]
fn reference_pages_are_generated_from_the_code() {
    let dir = root().join("docs/src/reference");
    let bless = std::env::var_os("TRACEFAULT_BLESS").is_some();
    let mut stale = Vec::new();
    for (name, text) in tracefault::cli::reference::pages() {
        let path = dir.join(name);
        if bless {
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(stale.is_empty(), "stale: {stale:?}: run `TRACEFAULT_BLESS=1 cargo test --test it reference`");
}

/// Every Markdown file under `dir`, recursively.
fn markdown(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            markdown(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// The documents a user reads: README, the top-level documents and the book.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> =
        ["README.md", "BENCHMARKS.md", "CHANGELOG.md", "CONTRIBUTING.md"].iter().map(|f| root().join(f)).collect();
    markdown(&root().join("docs/src"), &mut docs);
    docs.sort();
    docs
}

/// A heading's anchor as mdBook and GitHub make it: lower case, spaces to `-`, punctuation
/// other than `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code fences).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for l in text.lines() {
        if l.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && l.starts_with('#') {
            out.insert(anchor(l.trim_start_matches('#').replace('`', "").as_str()));
        }
    }
    out
}

/// The targets of a Markdown file's inline links and images, outside code.
fn links(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code, whose brackets are not links.
        let l: String = l.split('`').enumerate().filter(|(i, _)| i % 2 == 0).map(|(_, s)| s).collect();
        let mut rest = l.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push(after[..end].split_whitespace().next().unwrap_or("").to_owned());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") || link.is_empty() {
                continue;
            }
            let (file, frag) = link.split_once('#').map_or((link.as_str(), None), |(f, a)| (f, Some(a)));
            let target = if file.is_empty() { doc.clone() } else { doc.parent().unwrap().join(file) };
            if !target.exists() {
                broken.push(format!("{}: {link}: no such file", doc.display()));
                continue;
            }
            if let Some(frag) = frag
                && target.extension().is_some_and(|x| x == "md")
                && !anchors(&std::fs::read_to_string(&target).unwrap()).contains(frag)
            {
                broken.push(format!("{}: {link}: no such heading", doc.display()));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_books_contents_list_every_page() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let mut pages = Vec::new();
    markdown(&src, &mut pages);
    let missing: Vec<String> = pages
        .iter()
        .map(|p| p.strip_prefix(&src).unwrap().display().to_string())
        .filter(|p| p != "SUMMARY.md" && !listed.contains(p))
        .collect();
    assert!(missing.is_empty(), "pages not in docs/src/SUMMARY.md: {missing:?}");
}

#[test]
fn the_readme_fits_on_a_few_screens() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines: reference belongs in the book (docs/)");
    let first_screen: String = readme.lines().take(40).collect::<Vec<_>>().join("\n");
    for command in ["cargo run --release -- run scenarios/", "scripts/test.sh"] {
        assert!(first_screen.contains(command), "the first screen lacks `{command}`");
    }
}

/// A code block: its info string, the file the line before it names in backticks, its body.
type Block = (String, String, String);

/// The code blocks of a Markdown text.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let (mut info, mut body, mut named, mut last) = (None::<String>, String::new(), String::new(), String::new());
    for l in text.lines() {
        match (&info, l.strip_prefix("```")) {
            (None, Some(i)) => {
                info = Some(i.to_owned());
                named = last.split('`').nth(1).unwrap_or_default().to_owned();
            }
            (Some(i), Some(_)) => {
                out.push((i.clone(), named.clone(), std::mem::take(&mut body)));
                info = None;
            }
            (Some(_), None) => body += &format!("{l}\n"),
            (None, None) => {}
        }
        if !l.trim().is_empty() {
            last = l.to_owned();
        }
    }
    out
}

/// The README's quick starts and the book's examples run as written: each file a page writes
/// out (a `toml` or `python` block after the line that names it), then every `tracefault`
/// command of its `sh` blocks, in a folder holding only those files and the repository's
/// scenarios, fixtures and examples (exit 0 each; a command running `python` needs the SDKs'
/// virtualenv and is skipped without it).
#[test]
fn the_readme_quick_starts_and_the_books_examples_run_as_written() {
    let dir = tempfile::tempdir().unwrap();
    for linked in ["scenarios", "tests", "examples", "traces"] {
        std::os::unix::fs::symlink(root().join(linked), dir.path().join(linked)).unwrap();
    }
    let pages: Vec<(PathBuf, Vec<Block>)> =
        documents().into_iter().map(|p| (p.clone(), blocks(&std::fs::read_to_string(&p).unwrap()))).collect();
    for (page, bs) in &pages {
        for (_, name, body) in bs.iter().filter(|(i, n, _)| (i == "toml" || i == "python") && !n.is_empty()) {
            let path = dir.path().join(name);
            assert!(!path.exists(), "{}: {name} is written by another page too", page.display());
            std::fs::write(path, body).unwrap();
        }
    }
    assert!(dir.path().join("weather.toml").is_file() && dir.path().join("agent.py").is_file());
    let python = crate::wire::sdk_python();
    let mut ran = 0;
    for (page, bs) in &pages {
        for (_, _, body) in bs.iter().filter(|(i, _, _)| i == "sh") {
            for line in body.lines().map(|l| l.split(" #").next().unwrap().trim()) {
                let Some(args) = line.strip_prefix("tracefault ") else { continue };
                let mut args: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
                if let Some(p) = args.iter_mut().find(|a| *a == "python") {
                    let Some(py) = &python else { continue };
                    *p = py.display().to_string();
                }
                let o = crate::tracefault().current_dir(dir.path()).args(&args).output().unwrap();
                let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
                assert_eq!(o.status.code(), Some(0), "{}: `{line}`: {text}", page.display());
                ran += 1;
            }
        }
    }
    assert!(ran >= 6, "the documents' tracefault commands: {ran} ran");
}

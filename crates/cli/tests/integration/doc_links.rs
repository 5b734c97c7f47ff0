//! Every link and image in the repository's Markdown resolves: a relative path
//! names a file or directory that exists, and a `#fragment` into a Markdown file
//! names one of its headings (GitHub's anchors) or an explicit `<a id>`.
//! External links (`http:`, `https:`, `mailto:`, ...) are not fetched.

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// Directories never walked: build output, version control and `results/`
/// (the CLI's default output, ignored by git), which hold Markdown that is not
/// the repository's.
const SKIP_DIRS: &[&str] = &["target", ".git", "results"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !SKIP_DIRS.contains(&name) {
                markdown_files(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// GitHub's heading anchor: lowercase; letters, digits, `-` and `_` kept;
/// spaces become `-`; everything else dropped.
fn slug(text: &str) -> String {
    text.trim()
        .chars()
        .filter_map(|c| {
            if c == ' ' {
                Some('-')
            } else if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c)
            } else {
                None
            }
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// `id="..."` / `name="..."` / `src="..."` / `href="..."` values in raw HTML.
fn html_attr<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let pat = format!("{attr}=\"");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find(&pat) {
        // Not the tail of a longer attribute name (`data-id=`).
        let whole = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        rest = &rest[i + pat.len()..];
        if let Some(end) = rest.find('"') {
            if whole {
                out.push(&rest[..end]);
            }
            rest = &rest[end..];
        }
    }
    out
}

struct Doc {
    anchors: HashSet<String>,
    /// (line, destination, is_image)
    links: Vec<(usize, String, bool)>,
    /// Full reference links (`[text][label]`) whose label is never defined.
    undefined_refs: Vec<(usize, String)>,
}

fn parse(text: &str) -> Doc {
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut undefined_refs = Vec::new();
    let mut callback = |broken: pulldown_cmark::BrokenLink<'_>| {
        // Shortcut forms (`[0, 1]`) are ordinary text; only `[text][label]`
        // is unambiguously a link.
        if broken.link_type == LinkType::Reference {
            undefined_refs.push((line_of(broken.span.start), broken.reference.to_string()));
        }
        None
    };
    let parser = Parser::new_with_broken_link_callback(
        text,
        Options::ENABLE_TABLES | Options::ENABLE_FOOTNOTES | Options::ENABLE_STRIKETHROUGH,
        Some(&mut callback),
    );
    let mut anchors = HashSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut links = Vec::new();
    let mut heading: Option<String> = None;
    for (event, range) in parser.into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                // GitHub numbers repeated headings: `x`, `x-1`, `x-2`.
                let n = seen.entry(base.clone()).or_insert(0);
                let anchor = if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                };
                *n += 1;
                anchors.insert(anchor);
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::Start(Tag::Link { dest_url, .. }) => {
                links.push((line_of(range.start), dest_url.to_string(), false));
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                links.push((line_of(range.start), dest_url.to_string(), true));
            }
            Event::Html(h) | Event::InlineHtml(h) => {
                for attr in ["id", "name"] {
                    anchors.extend(html_attr(&h, attr).into_iter().map(str::to_string));
                }
                for v in html_attr(&h, "href") {
                    links.push((line_of(range.start), v.to_string(), false));
                }
                for v in html_attr(&h, "src") {
                    links.push((line_of(range.start), v.to_string(), true));
                }
            }
            _ => {}
        }
    }
    Doc {
        anchors,
        links,
        undefined_refs,
    }
}

/// `scheme:` before any `/`: a URL, not a path.
fn is_external(dest: &str) -> bool {
    match dest.find(':') {
        Some(i) => {
            let scheme = &dest[..i];
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
                && !dest[..i].contains('/')
        }
        None => false,
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Lexically normalized `base/rel`, so that `..` cannot be hidden by a
/// symlink and the problem reports read well.
fn join(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every broken link under `root`, one line each: `file:line: what`.
fn broken_links(root: &Path) -> (usize, Vec<String>) {
    let root = join(&fs::canonicalize(root).expect("repository root"), ".");
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    let mut docs: HashMap<PathBuf, Doc> = HashMap::new();
    for f in &files {
        let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("read {}: {e}", f.display()));
        docs.insert(f.clone(), parse(&text));
    }
    let mut problems = Vec::new();
    let mut checked = 0;
    for f in &files {
        let doc = &docs[f];
        let shown = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        for (line, name) in &doc.undefined_refs {
            problems.push(format!(
                "{shown}:{line}: reference [{name}] is never defined"
            ));
        }
        for (line, dest, image) in &doc.links {
            if dest.is_empty() || is_external(dest) {
                continue;
            }
            checked += 1;
            let kind = if *image { "image" } else { "link" };
            let (path_part, fragment) = match dest.split_once('#') {
                Some((p, frag)) => (p, Some(frag)),
                None => (dest.as_str(), None),
            };
            let path_part = percent_decode(path_part.split('?').next().unwrap_or(""));
            let target = if path_part.is_empty() {
                f.clone()
            } else if let Some(abs) = path_part.strip_prefix('/') {
                // GitHub resolves a leading `/` from the repository root.
                join(&root, abs)
            } else {
                join(f.parent().expect("file has a parent"), &path_part)
            };
            if !target.starts_with(&root) {
                problems.push(format!(
                    "{shown}:{line}: {kind} {dest} leaves the repository"
                ));
                continue;
            }
            if !target.exists() {
                problems.push(format!("{shown}:{line}: {kind} {dest}: no such file"));
                continue;
            }
            if let (Some(frag), Some(target_doc)) = (fragment, docs.get(&target)) {
                let frag = percent_decode(frag);
                if !frag.is_empty() && !target_doc.anchors.contains(&frag) {
                    problems.push(format!(
                        "{shown}:{line}: {kind} {dest}: no heading or anchor #{frag}"
                    ));
                }
            }
        }
    }
    (checked, problems)
}

#[test]
fn every_markdown_link_and_image_resolves() {
    let (checked, problems) = broken_links(&repo_root());
    // The walk found the documentation (README, docs/, the figures' links).
    assert!(
        checked > 50,
        "only {checked} links checked: did the walk find docs/?"
    );
    assert!(
        problems.is_empty(),
        "{} broken link(s) in the repository's Markdown:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The checker itself: a tree with one good and one bad link of each kind
/// reports exactly the bad ones, and skips `target/`.
#[test]
fn checker_reports_each_kind_of_broken_link() {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("doc_links-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("docs/figures")).unwrap();
    fs::create_dir_all(dir.join("target")).unwrap();
    fs::write(dir.join("docs/figures/a.png"), b"").unwrap();
    fs::write(
        dir.join("README.md"),
        "# Set-up (fresh machine)\n\n## Using it\n\n<a id=\"custom\"></a>\n\n\
         [ok](docs/b.md) [ok](docs/b.md#the-results-12) [ok](#set-up-fresh-machine) \
         [ok](#using-it) [ok](#custom) [ok](https://example.com/x.md) [ok](mailto:a@b) \
         ![ok](docs/figures/a.png) [ok](/docs/figures/)\n\n\
         ![bad](a.png) [bad](docs/missing.md) [bad](#nowhere) [bad](docs/b.md#nowhere) \
         [bad][nolabel] [bad](../outside.md) <img src=\"docs/figures/b.png\">\n\n\
         `[not a link](nowhere.md)`\n\n```\n[not a link](nowhere.md)\n```\n",
    )
    .unwrap();
    fs::write(
        dir.join("docs/b.md"),
        "# The results (§12)\n\n## Using it\n\n[ok](figures/a.png) [ok](../README.md#using-it)\n",
    )
    .unwrap();
    fs::write(dir.join("target/c.md"), "[skipped](nowhere.md)\n").unwrap();
    let (checked, problems) = broken_links(&dir);
    let _ = fs::remove_dir_all(&dir);
    let bad: Vec<&str> = problems
        .iter()
        .map(|p| p.split_once(": ").map_or(p.as_str(), |(_, what)| what))
        .collect();
    assert_eq!(
        bad,
        [
            "reference [nolabel] is never defined",
            "image a.png: no such file",
            "link docs/missing.md: no such file",
            "link #nowhere: no heading or anchor #nowhere",
            "link docs/b.md#nowhere: no heading or anchor #nowhere",
            "link ../outside.md leaves the repository",
            "image docs/figures/b.png: no such file",
        ],
        "{problems:#?}"
    );
    assert_eq!(checked, 7 + 6 + 2, "{problems:#?}");
}

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug("12. SYNERGY, Tiny Quanta and the hybrid"),
        "12-synergy-tiny-quanta-and-the-hybrid"
    );
    assert_eq!(
        slug("Set-up (fresh Debian machine)"),
        "set-up-fresh-debian-machine"
    );
    assert_eq!(slug("`psp run`: the runtime"), "psp-run-the-runtime");
    assert_eq!(slug("Perséphone"), "perséphone");
}

/// docs/results.md reads as a record, not a notebook: no commit hash (a
/// reader of a tarball or another clone cannot resolve one; trees are
/// named by their date), no "this morning", no "the issue" (readers do not
/// have the issues).
#[test]
fn the_results_name_no_commit_and_no_notebook_context() {
    let text = fs::read_to_string(repo_root().join("docs/results.md")).expect("docs/results.md");
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        for phrase in ["this morning", "the issue", "this session", "today's"] {
            if lower.contains(phrase) {
                found.push(format!("{}: '{phrase}'", n + 1));
            }
        }
        // A hash: 7 to 12 lowercase hex digits with a letter and a digit,
        // standing alone.
        for word in line.split(|c: char| !c.is_ascii_alphanumeric()) {
            let hex = (7..=12).contains(&word.len())
                && word
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if hex
                && word.bytes().any(|b| b.is_ascii_digit())
                && word.bytes().any(|b| b.is_ascii_alphabetic())
            {
                found.push(format!("{}: '{word}'", n + 1));
            }
        }
    }
    assert!(found.is_empty(), "docs/results.md: {}", found.join(", "));
}

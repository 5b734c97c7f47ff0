//! The commands the README and the guide quote are the binary's: every
//! `psp SUBCOMMAND` in a code block or a code span names a subcommand that
//! `psp --help` lists, and every `--flag` quoted after it is one that
//! `psp SUBCOMMAND --help` lists. The guide's index links every page of the
//! guide. (That links resolve is `doc_links.rs`'s.)

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents whose commands are checked: the README and the guide.
fn documents() -> Vec<PathBuf> {
    let root = repo_root();
    let mut docs = vec![root.join("README.md")];
    let mut guide: Vec<PathBuf> = fs::read_dir(root.join("docs/guide"))
        .expect("docs/guide exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    assert!(guide.len() >= 7, "docs/guide has {} pages", guide.len());
    docs.extend(guide);
    docs
}

/// The code of a Markdown text, with the line each piece starts on: every
/// line of a code block (shell and unlabelled ones), every code span.
fn code_of(text: &str) -> Vec<(usize, String)> {
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut block: Option<(usize, bool)> = None;
    for (event, range) in Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let shell = match kind {
                    CodeBlockKind::Indented => true,
                    CodeBlockKind::Fenced(lang) => {
                        matches!(lang.as_ref(), "" | "sh" | "bash" | "console" | "shell")
                    }
                };
                block = Some((line_of(range.start), shell));
            }
            Event::End(TagEnd::CodeBlock) => block = None,
            Event::Text(t) => {
                if let Some((start, shell)) = block
                    && shell
                {
                    // A fenced block's text starts on the line after the fence.
                    let first = if text[range.start..].starts_with("```") {
                        start + 1
                    } else {
                        line_of(range.start)
                    };
                    for (i, l) in t.lines().enumerate() {
                        out.push((first.max(start) + i, l.to_string()));
                    }
                }
            }
            Event::Code(c) => out.push((line_of(range.start), c.to_string())),
            _ => {}
        }
    }
    out
}

/// Each `psp SUBCOMMAND ...` in `code`: the subcommand and the flags quoted
/// up to the end of that command (a pipe, `&&`, `;`, a redirection or a
/// comment).
fn commands_in(code: &str) -> Vec<(String, Vec<String>)> {
    // A shell comment is prose.
    let code = match code.find(" #") {
        Some(i) => &code[..i],
        None if code.starts_with('#') => "",
        None => code,
    };
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(i) = code[from..].find("psp ").map(|i| i + from) {
        from = i + 4;
        // `psp` as a word: at the start, after a space, `(` or a path's `/`.
        if i > 0 && !matches!(bytes[i - 1], b' ' | b'(' | b'/' | b'\t') {
            continue;
        }
        let rest = &code[i + 4..];
        let end = [" | ", " &&", ";", " >", " <", " 2>"]
            .iter()
            .filter_map(|s| rest.find(s))
            .min()
            .unwrap_or(rest.len());
        let mut words = rest[..end].split_whitespace();
        let Some(sub) = words.next() else { continue };
        if !sub.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            || !sub
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            continue;
        }
        let flags = words
            .filter_map(|w| {
                let w = w.trim_start_matches(['[', '(', '`']);
                let name: String = w
                    .strip_prefix("--")?
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                (!name.is_empty()).then(|| format!("--{name}"))
            })
            .collect();
        out.push((sub.to_string(), flags));
    }
    out
}

/// Whether `help` lists `flag` (followed by a space, `=`, `,`, `<`, `[`
/// or the line's end, not by more of a longer flag's name).
fn help_lists(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(i, _)| {
        help[i + flag.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
    })
}

/// The problems of the commands quoted in `text` (named `name`), given the
/// binary's subcommands and a way to get a subcommand's help.
fn problems_in(
    name: &str,
    text: &str,
    subcommands: &BTreeSet<String>,
    help: &mut dyn FnMut(&str) -> String,
) -> (usize, Vec<String>) {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (line, code) in code_of(text) {
        for (sub, flags) in commands_in(&code) {
            checked += 1;
            if !subcommands.contains(&sub) {
                problems.push(format!("{name}:{line}: `psp {sub}`: no such subcommand"));
                continue;
            }
            let text = help(&sub);
            for f in flags {
                if f != "--help" && !help_lists(&text, &f) {
                    problems.push(format!("{name}:{line}: `psp {sub}` has no {f}"));
                }
            }
        }
    }
    (checked, problems)
}

fn psp(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_psp"))
        .args(args)
        .output()
        .expect("run psp");
    assert!(out.status.success(), "psp {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8 help")
}

/// The subcommands `psp --help` lists.
fn subcommands() -> BTreeSet<String> {
    let help = psp(&["--help"]);
    let list = help
        .split_once("Commands:")
        .expect("psp --help lists commands")
        .1
        .split("\n\n")
        .next()
        .unwrap_or("");
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

fn help_cache() -> impl FnMut(&str) -> String {
    let mut cache: HashMap<String, String> = HashMap::new();
    move |sub: &str| {
        cache
            .entry(sub.to_string())
            .or_insert_with(|| psp(&[sub, "--help"]))
            .clone()
    }
}

#[test]
fn every_quoted_command_is_the_binarys() {
    let subs = subcommands();
    let mut help = help_cache();
    let root = repo_root();
    let (mut checked, mut problems) = (0, Vec::new());
    let mut seen = BTreeSet::new();
    for doc in documents() {
        let text = fs::read_to_string(&doc).expect("read a document");
        let name = doc
            .strip_prefix(&root)
            .unwrap_or(&doc)
            .display()
            .to_string();
        let (n, p) = problems_in(&name, &text, &subs, &mut help);
        checked += n;
        problems.extend(p);
        for (_, code) in code_of(&text) {
            seen.extend(commands_in(&code).into_iter().map(|(s, _)| s));
        }
    }
    assert!(
        problems.is_empty(),
        "{} quoted command(s) the binary does not have:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The walk found the commands: the tour's and the reference's.
    assert!(checked > 100, "only {checked} commands checked");
    for sub in [
        "sim",
        "run",
        "serve",
        "load",
        "sweep",
        "reproduce",
        "top",
        "man",
    ] {
        assert!(seen.contains(sub), "no document quotes `psp {sub}`");
    }
}

/// The checker itself: a wrong subcommand and a wrong flag are reported, with
/// their lines; right ones, prose and other programs are not.
#[test]
fn checker_reports_a_wrong_subcommand_and_a_wrong_flag() {
    let text = "# T\n\nSay `psp` alone, `psp_runtime::Handler`, `--system psp:network=0`.\n\n\
                ```sh\npsp sim --workload w --policy darc --json   # --not-a-flag in a comment\n\
                psp simulate --workload w\npsp top 127.0.0.1:9100\n\
                ip netns exec a psp serve --datapath xdp | head\n```\n\n\
                Then `psp run --no-such-flag` and `psp load [--server-profile ADDR]`.\n";
    let subs: BTreeSet<String> = ["sim", "run", "serve", "load", "top"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut help = |sub: &str| match sub {
        "sim" => "--workload <W>\n--policy <P>\n--json\n".to_string(),
        "serve" => "--datapath <D>\n".to_string(),
        "load" => "--server-profile <ADDR>\n--server <S>\n".to_string(),
        "top" => "--interval <DURATION>\n".to_string(),
        _ => "--workload-file <W>\n".to_string(),
    };
    let (checked, problems) = problems_in("t.md", text, &subs, &mut help);
    assert_eq!(
        problems,
        [
            "t.md:7: `psp simulate`: no such subcommand",
            "t.md:12: `psp run` has no --no-such-flag",
        ],
        "{problems:#?}"
    );
    assert_eq!(checked, 6);
    assert!(help_lists("--server <S>", "--server"));
    assert!(!help_lists("--server-profile <S>", "--server"));
}

/// Every page of the guide is linked from its index.
#[test]
fn the_guide_index_links_every_page() {
    let dir = repo_root().join("docs/guide");
    let index = fs::read_to_string(dir.join("README.md")).expect("docs/guide/README.md");
    for doc in documents().into_iter().skip(1) {
        let page = doc.file_name().unwrap().to_str().unwrap();
        if page != "README.md" {
            assert!(
                index.contains(&format!("]({page})")),
                "docs/guide/README.md does not link {page}"
            );
        }
    }
}

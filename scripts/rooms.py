#!/usr/bin/env python3
"""The size of the project's rooms, counted from the source as text.

    scripts/rooms.py [--top N] [--repo DIR]

Prints, for the Rust sources under crates/*/src (tests/, benches/ and examples/
left out, and each file's `#[cfg(test)]` tail left out):

- files with more than 1,000 lines of code (blank and comment-only lines not
  counted), and how many;
- functions longer than 120 lines (from `fn` to its closing brace), and how many;
- import circles between files: strongly connected groups of files that reach
  each other through `use crate::...` / `super::...` paths or `crate::...`
  paths written in full where used, and which of them span files of
  different folders;
- the public items of `psp-runtime` (`pub` items in modules reachable from its
  lib.rs through `pub mod`, plus its `pub use` re-exports).

A count made from text: a macro-generated function or an import through a
glob re-export can be missed; open the code at the names it prints.
"""

import argparse
import os
import re
import sys
from collections import defaultdict

LOC_LIMIT = 1000
FN_LIMIT = 120


def strip_test_tail(lines):
    """Lines before the first top-level `#[cfg(test)]` that starts a module."""
    for i, line in enumerate(lines):
        if line.startswith("#[cfg(test)]"):
            nxt = "".join(lines[i + 1 : i + 3])
            if "mod " in nxt:
                return lines[:i]
    return lines


def code_lines(lines):
    n, in_block = 0, False
    for line in lines:
        s = line.strip()
        if in_block:
            if "*/" in s:
                in_block = False
            continue
        if not s or s.startswith("//"):
            continue
        if s.startswith("/*"):
            in_block = "*/" not in s
            continue
        n += 1
    return n


def blank_literals(text):
    """The text with string/char literal contents and comments blanked (same
    line structure), so that braces can be counted."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|\\x..|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)  # a lifetime
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


FN_RE = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")


def long_functions(path, lines):
    text = blank_literals("".join(lines))
    blines = text.split("\n")
    found = []
    for i, line in enumerate(blines):
        m = FN_RE.match(line)
        if not m:
            continue
        depth, started, j = 0, False, i
        while j < len(blines):
            for ch in blines[j]:
                if ch == "{":
                    depth += 1
                    started = True
                elif ch == "}":
                    depth -= 1
                elif ch == ";" and not started and depth == 0:
                    break  # a declaration without a body
            else:
                if started and depth == 0:
                    break
                j += 1
                continue
            break
        if started:
            length = j - i + 1
            if length > FN_LIMIT:
                found.append((length, f"{path}:{i + 1}", m.group(7)))
    return found


def module_path(crate_src, path):
    rel = os.path.relpath(path, crate_src)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main", "mod"):
        rel = rel[:-1]
    return tuple(rel)


USE_RE = re.compile(r"\buse\s+([^;]+);", re.S)
# A path written in full where it is used (`crate::net::declared(w)`), not
# imported: an edge as much as a `use`.
INLINE_RE = re.compile(r"(?<![\w:])crate::((?:\w+::)*\w+)")


def expand_use(tree):
    """`a::{b, c::d}` -> [a::b, a::c::d] (paths as lists)."""
    tree = re.sub(r"\s+", "", tree)
    tree = re.sub(r"\bas\w+", "", tree)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        return parts

    def go(s):
        if "{" not in s:
            return [s.split("::")]
        pre, rest = s.split("{", 1)
        inner = rest[: rest.rfind("}")]
        pre = [p for p in pre.split("::") if p]
        out = []
        for part in split_top(inner):
            for tail in go(part):
                out.append(pre + [t for t in tail if t])
        return out

    return go(tree)


def import_graph(root):
    """Edges between files of one crate: file -> files whose items it uses."""
    edges = defaultdict(set)
    for crate in sorted(os.listdir(os.path.join(root, "crates"))):
        src = os.path.join(root, "crates", crate, "src")
        if not os.path.isdir(src):
            continue
        modules = {}
        for dirpath, _, files in os.walk(src):
            for f in files:
                if f.endswith(".rs"):
                    p = os.path.join(dirpath, f)
                    modules[module_path(src, p)] = p
        for mod, path in modules.items():
            with open(path) as fh:
                lines = strip_test_tail(fh.readlines())
            text = blank_literals("".join(lines))
            paths = [p for m in USE_RE.finditer(text) for p in expand_use(m.group(1))]
            paths += [["crate"] + m.group(1).split("::") for m in INLINE_RE.finditer(text)]
            for parts in paths:
                if not parts:
                    continue
                if parts[0] == "crate":
                    target = list(parts[1:])
                elif parts[0] == "super":
                    base = list(mod if os.path.basename(path) in ("mod.rs", "lib.rs") else mod[:-1])
                    k = 0
                    while k < len(parts) and parts[k] == "super":
                        base = base[:-1] if k > 0 else base
                        k += 1
                    target = base + list(parts[k:])
                elif parts[0] == "self":
                    base = list(mod if os.path.basename(path) in ("mod.rs", "lib.rs") else mod)
                    target = base + list(parts[1:])
                else:
                    continue
                # The longest module prefix that is a file.
                for cut in range(len(target), -1, -1):
                    t = tuple(target[:cut])
                    if t in modules:
                        if modules[t] != path and cut > 0:
                            edges[path].add(modules[t])
                        break
    return edges


def cycles(edges):
    """Tarjan's strongly connected components of size > 1."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    nodes = set(edges) | {w for ws in edges.values() for w in ws}
    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


PUB_ITEM = re.compile(r"^\s*pub\s+(unsafe\s+)?(fn|struct|enum|trait|type|const|static|mod|use|union)\b")


def runtime_public_items(root):
    src = os.path.join(root, "crates", "runtime", "src")
    if not os.path.isdir(src):
        return None

    def public_files(path, mod_dir):
        with open(path) as fh:
            lines = strip_test_tail(fh.readlines())
        files = [(path, lines)]
        for line in lines:
            m = re.match(r"^\s*pub\s+mod\s+(\w+)\s*;", line)
            if m:
                name = m.group(1)
                for cand in (os.path.join(mod_dir, name + ".rs"), os.path.join(mod_dir, name, "mod.rs")):
                    if os.path.exists(cand):
                        sub_dir = os.path.join(mod_dir, name)
                        files += public_files(cand, sub_dir)
                        break
        return files

    count = 0
    for path, lines in public_files(os.path.join(src, "lib.rs"), src):
        text = blank_literals("".join(lines))
        for line in text.split("\n"):
            if PUB_ITEM.match(line):
                if re.match(r"^\s*pub\s+mod\b", line):
                    count += 1
                elif re.match(r"^\s*pub\s+use\b", line):
                    pass
                else:
                    count += 1
        for m in re.finditer(r"\bpub\s+use\s+([^;]+);", text):
            count += len(expand_use(m.group(1)))
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--top", type=int, default=20, help="rows per list")
    args = ap.parse_args()
    root = os.path.abspath(args.repo)

    big, fns = [], []
    for dirpath, _, files in os.walk(os.path.join(root, "crates")):
        rel = os.path.relpath(dirpath, root).split(os.sep)
        if len(rel) < 3 or rel[2] != "src":
            continue
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            p = os.path.join(dirpath, f)
            with open(p) as fh:
                lines = strip_test_tail(fh.readlines())
            relp = os.path.relpath(p, root)
            loc = code_lines(lines)
            if loc > LOC_LIMIT:
                big.append((loc, relp))
            fns += long_functions(relp, lines)

    print(f"files over {LOC_LIMIT} lines of code (before their tests): {len(big)}")
    for loc, p in sorted(big, reverse=True)[: args.top]:
        print(f"  {loc:5}  {p}")
    print(f"functions over {FN_LIMIT} lines: {len(fns)}")
    for length, where, name in sorted(fns, reverse=True)[: args.top]:
        print(f"  {length:5}  {where}  {name}")

    circles = cycles(import_graph(root))
    cross = [c for c in circles if len({os.path.dirname(p) for p in c}) > 1]
    print(f"import circles between files: {len(circles)} ({len(cross)} across folders)")
    for c in circles:
        print(f"  {len(c)} files: " + ", ".join(os.path.relpath(p, root) for p in c))

    n = runtime_public_items(root)
    if n is not None:
        print(f"public items of psp-runtime: {n}")


if __name__ == "__main__":
    main()

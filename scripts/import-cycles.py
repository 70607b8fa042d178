#!/usr/bin/env python3
"""Fails when files of src/ reach each other through what they import.

Each `.rs` file is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`). Every path a file
names that starts with `crate`, `super` or `self` (in `use` trees too) points at the
deepest module of that path that has a file. A file pointing at one of its own descendants
does not count: a parent declares and re-exports its children. Files that reach each other
(a strongly connected group of two or more) are an import circle; each is printed, and the
script exits 1 if there is any.

Usage: scripts/import-cycles.py [src-dir]
"""

import os
import re
import sys


def module_path(root, path):
    parts = os.path.relpath(path, root)[: -len(".rs")].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def strip(text):
    """The code without comments and string contents."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def use_paths(tree):
    """The paths of a `use` tree such as `a::{b, c::{d as e}}`."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [tree.split(" as ")[0].strip().split("::")]
    head = [s for s in tree[:brace].strip().rstrip(":").split("::") if s]
    inner, depth, part, paths = tree[brace + 1 : tree.rindex("}")], 0, "", []
    for ch in inner + ",":
        if ch == "," and depth == 0:
            if part.strip():
                paths += [head + p for p in use_paths(part)]
            part = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        part += ch
    return paths


def target(me, segments, modules):
    """The deepest module with a file that `segments`, named in module `me`, points at."""
    if segments[0] == "crate":
        base, rest = [], segments[1:]
    elif segments[0] in ("super", "self"):
        base, rest = list(me), segments
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    else:
        return None
    for segment in rest:
        if tuple(base + [segment]) not in modules:
            break
        base.append(segment)
    return tuple(base)


def circles(graph):
    """Strongly connected groups of two or more (Tarjan, without recursion)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "src"
    texts = {}
    for directory, _, names in os.walk(root):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as file:
                    texts[module_path(root, path)] = strip(file.read())
    modules = set(texts)
    graph = {}
    for me, text in texts.items():
        named = []
        for tree in re.findall(r"\buse\s+((?:crate|super|self)\b[^;]*);", text, re.S):
            named += use_paths(tree)
        named += [p.split("::") for p in re.findall(r"\b(?:crate|super|self)(?:::\w+)+", text)]
        points = {target(me, segments, modules) for segments in named}
        graph[me] = {
            t for t in points if t is not None and t != me and t[: len(me)] != me
        }
    found = circles(graph)
    for group in found:
        print(f"import circle of {len(group)} files: " + ", ".join("/".join(m) or "lib" for m in group))
    print(f"import circles: {len(found)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

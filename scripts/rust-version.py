#!/usr/bin/env python3
"""The oldest Rust that the locked dependency tree allows: the highest `rust_version` among
the crates that tower-lock depends on (normal dependencies, all features, as Cargo.lock
pins them). `--check` fails unless Cargo.toml's `rust-version` says exactly that."""
import json
import subprocess
import sys

metadata = json.loads(subprocess.check_output(
    ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"]))
packages = {p["id"]: p for p in metadata["packages"]}
nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
root = metadata["resolve"]["root"]

reached, stack = set(), [root]
while stack:
    for dep in nodes[stack.pop()]["deps"]:
        normal = any(kind["kind"] is None for kind in dep["dep_kinds"])
        if normal and dep["pkg"] not in reached:
            reached.add(dep["pkg"])
            stack.append(dep["pkg"])


def parsed(version):
    return tuple(int(part) for part in version.split("."))


needs = [(packages[p]["rust_version"], packages[p]["name"], packages[p]["version"])
         for p in reached if packages[p].get("rust_version")]
needed, name, version = max(needs, key=lambda need: parsed(need[0]))
needed = ".".join(str(part) for part in parsed(needed)[:2])
declared = packages[root]["rust_version"]
print(f"rust-version {needed} (set by {name} {version}); Cargo.toml says {declared}")
if "--check" in sys.argv and parsed(declared) != parsed(needed):
    sys.exit(f"set rust-version = \"{needed}\" in Cargo.toml (the locked dependencies need it)")

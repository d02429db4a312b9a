#!/usr/bin/env python3
"""The layering of the source tree, checked (run by `make lint`).

Usage: layers.py [ROOT]   (ROOT: the repository, default the current directory)

Data flows one way (docs/architecture.md, "Layers"): a file may include the
headers of its own layer and of the layers below it, never of one above. A
header belongs to the layer of the .c file it is named after (src/**/NAME.c
implements include/gpuprov/NAME.h); a header-only file is named in
HEADER_ONLY with its layer. Also fails when two source files share a
basename, when a header has no .c of its name and is not in HEADER_ONLY, or
when a .c file is in no layer. Prints one line per problem, naming the file
and the include, and exits 1; silent and 0 when the tree keeps the rules.
"""
import fnmatch
import os
import re
import sys

# Bottom first. Patterns match a .c file's path from the repository root.
LAYERS = [
    # Code that touches no path, root or command: memory in, memory out.
    ("pure", ["src/pure/*.c", "src/util.c", "src/strmap.c", "src/json.c", "src/diff.c",
              "src/error.c", "src/exitcodes.c", "src/schema.c"]),
    # Adapters to the target (src/sys) and NVIDIA knowledge (src/nv).
    ("low", ["src/sys/*.c", "src/nv/*.c"]),
    # The run's data and its renderers: profile, journal, plan, report, output.
    ("model", ["src/profile.c", "src/match.c", "src/journal.c", "src/plan.c",
               "src/report.c", "src/status.c", "src/history.c", "src/output.c", "src/event.c",
               "src/progress.c", "src/prometheus.c", "src/textfile.c",
               "src/deeptable.c"]),
    # The effect door and the package layer that goes through it.
    ("door", ["src/context.c", "src/download.c", "src/pkg.c", "src/prefetch.c",
              "src/rebootsig.c", "src/undo.c", "src/rollback.c"]),
    ("stages", ["src/stages/*.c"]),
    ("engine", ["src/engine.c"]),
    ("cli", ["src/catalog.c", "src/detect.c", "src/stagelist.c", "src/main.c"]),
]

# Headers with no .c of their name (types and constants only), and their layer.
HEADER_ONLY = {
    "pkg_types.h": "pure",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"gpuprov/([^"]+)"', re.M)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    rank = {name: i for i, (name, _) in enumerate(LAYERS)}
    problems = []

    sources = []
    for d, _, files in os.walk(os.path.join(root, "src")):
        sources += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(".c")]
    sources.sort()
    headers = sorted(f for f in os.listdir(os.path.join(root, "include/gpuprov"))
                     if f.endswith(".h"))

    layer_of = {}  # path -> layer name
    by_base = {}
    for src in sources:
        base = os.path.basename(src)
        by_base.setdefault(base, []).append(src)
        for name, pats in LAYERS:
            if any(fnmatch.fnmatchcase(src, p) for p in pats):
                layer_of[src] = name
                break
        else:
            problems.append(f"{src}: in no layer: add it to LAYERS in tests/lint/layers.py")
    for base, paths in sorted(by_base.items()):
        if len(paths) > 1:
            problems.append(f"{' and '.join(paths)}: two source files named {base}: "
                            "rename one so that each name says what it holds")

    for h in headers:
        path = "include/gpuprov/" + h
        impl = by_base.get(h[:-2] + ".c", [])
        if h in HEADER_ONLY:
            if impl:
                problems.append(f"{path}: listed as header-only in tests/lint/layers.py, "
                                f"but {impl[0]} implements it: drop it from HEADER_ONLY")
            layer_of[path] = HEADER_ONLY[h]
        elif not impl:
            problems.append(f"{path}: no source file {h[:-2]}.c implements it: name the "
                            "header after its .c, or list a header-only file in HEADER_ONLY")
        elif impl[0] in layer_of:
            layer_of[path] = layer_of[impl[0]]

    for path in sources + ["include/gpuprov/" + h for h in headers]:
        if path not in layer_of:
            continue
        mine = layer_of[path]
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            inc = "include/gpuprov/" + m.group(1)
            theirs = layer_of.get(inc)
            if theirs is not None and rank[theirs] > rank[mine]:
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{path}:{line}: includes gpuprov/{m.group(1)} of layer "
                                f"'{theirs}', above its own layer '{mine}': an include runs "
                                "upward (move what it needs down, or the file up)")

    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

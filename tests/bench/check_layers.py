#!/usr/bin/env python3
"""Checks bench's libraries against the layer table in docs/architecture.md ("bench's libraries").

Every `#include "..."` under src/bench/<folder>/ and include/fib/bench/<folder>/ must name:
  - a private header of its own library (a path under src/bench/<folder>/, as the library's
    private include path finds it; public headers include only "fib/..." paths);
  - a public header (include/fib/bench/<lib>/) of its own library or of one it may use, directly
    or through the libraries it uses;
  - a header of a non-bench module its row (or a row it uses) names, or a top-level fib/*.h.
The table itself must be one-way (a library uses only the ones listed before it) and cover every
folder of src/bench; src/CMakeLists.txt's fib_bench_library(<folder> USES ...) must link exactly
the bench libraries the table gives, so the build enforces the same graph.

  check_layers.py ROOT               check the tree at ROOT
  check_layers.py --self-test ROOT   show that the check fails on bad includes (temp copies)
"""

import re
import shutil
import sys
import tempfile
from pathlib import Path

TABLE_HEADING = "## bench's libraries"
SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


class Layers:
    def __init__(self, order, uses, modules):
        self.order = order  # folders, bottom to top
        self.uses = uses  # folder -> bench folders it may use (its row)
        self.modules = modules  # folder -> non-bench modules it may use (its row)

    def closure(self, folder):
        """The bench libraries `folder` may include from: its own and those it uses, recursively."""
        seen, todo = {folder}, [folder]
        while todo:
            for used in self.uses.get(todo.pop(), ()):
                if used not in seen:
                    seen.add(used)
                    todo.append(used)
        return seen

    def allowed_modules(self, folder):
        return set().union(*(self.modules.get(f, set()) for f in self.closure(folder)))


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_table(root, problems):
    doc = root / "docs" / "architecture.md"
    lines = doc.read_text().splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == TABLE_HEADING)
    except StopIteration:
        problems.append(f"{doc}: no '{TABLE_HEADING}' section")
        return None
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            rows.append(cells(line))
        elif rows:
            break
    if len(rows) < 3 or [c.lower() for c in rows[0]][:1] != ["folder"] or rows[0][-1] != "may use":
        problems.append(f"{doc}: the '{TABLE_HEADING}' table needs columns folder | ... | may use")
        return None
    modules = module_names(root)
    listed = {n for row in rows[2:] for n in re.findall(r"`([^`]+)`", row[0])[:1]}
    order, uses, mods = [], {}, {}
    for row in rows[2:]:
        names = re.findall(r"`([^`]+)`", row[0])
        if not names:
            problems.append(f"{doc}: row '{row[0]}' names no folder in backticks")
            continue
        folder = names[0]
        order.append(folder)
        uses[folder], mods[folder] = set(), set()
        for name in re.findall(r"`([^`]+)`", row[-1]):
            if name in modules:
                mods[folder].add(name)
            elif name in order[:-1]:
                uses[folder].add(name)
            elif name in listed:
                problems.append(f"{doc}: {folder} may use {name}, which is not below it")
            else:
                problems.append(
                    f"{doc}: {folder} may use {name}: neither a module nor a bench library below it"
                )
    return Layers(order, uses, mods)


def module_names(root):
    """fib's modules other than bench: the folders of src/ and include/fib/."""
    names = {p.name for p in (root / "src").iterdir() if p.is_dir()}
    names |= {p.name for p in (root / "include" / "fib").iterdir() if p.is_dir()}
    names.discard("bench")
    return names


def cmake_uses(root):
    """fib_bench_library(<folder> USES a b DEPS ...) calls of src/CMakeLists.txt: folder -> USES."""
    text = (root / "src" / "CMakeLists.txt").read_text()
    text = re.sub(r"#.*", "", text)
    found = {}
    for m in re.finditer(r"fib_bench_library\(\s*([\w$]+)([^)]*)\)", text):
        if m.group(1).startswith("$"):  # the function's own definition
            continue
        words = m.group(2).split()
        used = []
        if "USES" in words:
            for w in words[words.index("USES") + 1 :]:
                if w.isupper():
                    break
                used.append(w)
        found[m.group(1)] = set(used)
    return found


def check_include(path, folder, public, inc, layers, modules, root):
    """None when `path` (of library `folder`) may include `inc`, else why not."""
    if ".." in Path(inc).parts:
        return "climbs out of its folder"
    own = root / "src" / "bench" / folder
    if not inc.startswith("fib/"):
        if public:
            return 'a public header includes only "fib/..." headers'
        # As the compiler looks: beside the file, then the library's private include path.
        for candidate in (path.parent / inc, own / inc):
            if candidate.is_file() and own in candidate.resolve().parents:
                return None
        if inc.startswith(("bench/", "src/")):
            return "names a private header of another library (not on this library's path)"
        return "is no private header of " + folder
    parts = Path(inc).parts
    if len(parts) == 2:  # fib/solution.h, fib/version.h: no module's
        return None
    if parts[1] == "bench":
        lib = parts[2] if len(parts) > 3 else None
        if lib is None or lib not in layers.order:
            return "is no bench library's public header (include/fib/bench/<folder>/)"
        if lib not in layers.closure(folder):
            return f"is {lib}'s, which {folder} may not use (docs/architecture.md)"
        return None
    if parts[1] not in modules:
        return f"names no module ({parts[1]})"
    if parts[1] not in layers.allowed_modules(folder):
        return f"is module {parts[1]}'s, which {folder} may not use (docs/architecture.md)"
    return None


def check(root):
    root = Path(root).resolve()
    problems = []
    layers = parse_table(root, problems)
    if layers is None:
        return problems
    modules = module_names(root)
    bench_src = root / "src" / "bench"
    bench_inc = root / "include" / "fib" / "bench"
    folders = {p.name for p in bench_src.iterdir() if p.is_dir()}
    folders |= {p.name for p in bench_inc.iterdir() if p.is_dir()}
    for f in sorted(folders - set(layers.order)):
        problems.append(f"bench folder {f} has no row in docs/architecture.md's layer table")
    for f in sorted(set(layers.order) - folders):
        problems.append(f"the layer table's {f} is no folder of src/bench")
    stray = [p for p in bench_inc.iterdir() if p.is_file()]
    for p in stray:
        problems.append(f"{p.relative_to(root)}: public headers live in include/fib/bench/<folder>/")
    cmake = cmake_uses(root)
    for f in layers.order:
        if f in folders and cmake.get(f) != layers.uses[f]:
            got = "no fib_bench_library call" if f not in cmake else sorted(cmake[f])
            problems.append(
                f"src/CMakeLists.txt: fib_bench_{f} USES {got}, the table {sorted(layers.uses[f])}"
            )
    for base, public in ((bench_src, False), (bench_inc, True)):
        for path in sorted(base.rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            folder = path.relative_to(base).parts[0]
            if folder not in layers.order:
                continue
            text = path.read_text()
            for m in INCLUDE_RE.finditer(text):
                why = check_include(path, folder, public, m.group(1), layers, modules, root)
                if why:
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f'{path.relative_to(root)}:{line}: "{m.group(1)}" {why}')
    return problems


def copy_tree(root, dest):
    for rel in ("docs/architecture.md", "src/CMakeLists.txt"):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / rel, dest / rel)
    shutil.copytree(root / "src" / "bench", dest / "src" / "bench")
    shutil.copytree(root / "include" / "fib" / "bench", dest / "include" / "fib" / "bench")
    for base in ("src", "include/fib"):  # the other modules: their names are what counts
        for p in (root / base).iterdir():
            if p.is_dir() and p.name != "bench":
                (dest / base / p.name).mkdir(parents=True, exist_ok=True)


def self_test(root):
    """Each bad change to a copy of the tree must be reported with the words expected."""
    root = Path(root).resolve()

    def add_include(rel, inc):
        def change(tree):
            p = tree / rel
            p.write_text(f'#include "{inc}"\n' + p.read_text())

        return change

    def edit(rel, old, new):
        def change(tree):
            p = tree / rel
            text = p.read_text()
            assert old in text, f"{rel} no longer holds {old!r}: update the self-test"
            p.write_text(text.replace(old, new, 1))

        return change

    cases = [
        ("upward include", add_include("src/bench/timing/stats.cpp", "fib/bench/run/run.h"),
         "which timing may not use"),
        ("sibling's private header",
         add_include("src/bench/run/judge.cpp", "bench/worker/worker_common.h"),
         "private header of another library"),
        ("sibling's private header by a relative path",
         add_include("src/bench/run/judge.cpp", "../worker/worker_common.h"),
         "climbs out of its folder"),
        ("private header of its own that does not exist",
         add_include("src/bench/eval/compare.cpp", "worker_common.h"),
         "is no private header of eval"),
        ("public header of a library not below",
         add_include("src/bench/worker/target.cpp", "fib/bench/launch/worker_process.h"),
         "which worker may not use"),
        ("public header including a private one",
         add_include("include/fib/bench/timing/timing.h", "stats.h"),
         'includes only "fib/..."'),
        ("module not allowed", add_include("src/bench/timing/stats.cpp", "fib/dataset/files.h"),
         "module dataset's, which timing may not use"),
        ("table using a library above", edit("docs/architecture.md", "| `trace` |",
                                             "| `trace`, `run` |"),
         "which is not below it"),
        ("CMake linking what the table does not give",
         edit("src/CMakeLists.txt", "fib_bench_library(protocol USES timing",
              "fib_bench_library(protocol USES timing eval"),
         "fib_bench_protocol USES"),
        ("folder with no row", lambda tree: (tree / "src/bench/newlib").mkdir(),
         "newlib has no row"),
    ]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / "clean"
        copy_tree(root, clean)
        baseline = check(clean)
        if baseline:
            print("self-test: the unchanged copy already fails:\n  " + "\n  ".join(baseline))
            return 1
        for i, (name, change, expected) in enumerate(cases):
            tree = Path(tmp) / f"case{i}"
            copy_tree(root, tree)
            change(tree)
            problems = check(tree)
            if any(expected in p for p in problems):
                print(f"self-test: {name}: caught")
            else:
                failed += 1
                print(f"self-test: {name}: NOT caught (wanted '{expected}'), got {problems}")
    return 1 if failed else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        return self_test(argv[2])
    if len(argv) != 2:
        print(__doc__)
        return 2
    problems = check(argv[1])
    for p in problems:
        print(p)
    print(f"check_layers: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

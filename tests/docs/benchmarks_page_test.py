#!/usr/bin/env python3
"""docs/benchmarks.md stays a page of current figures: under 300 lines, no issue numbers (#27),
no commit hashes (history lives in git). Prints each offending line and exits 1.

    benchmarks_page_test.py PAGE          check PAGE
    benchmarks_page_test.py --self-test   check that the rules catch what they are for and
                                          leave figures, UUIDs and hex constants alone
"""
import re
import sys

MAX_LINES = 299  # "under 300"

# An issue or pull-request reference: '#' and digits, not an HTML entity (&#8212;) or part of a
# word or an anchor (#end-to-end-speed).
ISSUE = re.compile(r"(?<![&\w])#\d+\b")
# A commit hash: 7 to 40 lowercase hex digits standing alone, with at least one digit and one
# letter a-f (so numbers like 1059 and words like 'facade' are not hashes). A run joined to a
# hyphen is a UUID's part (a workload's b8f4f012-a32e-...), one joined to a word or '0x' a
# name or constant. A hash of digits only cannot be told from a figure and is not caught.
HASH = re.compile(r"(?<![\w-])[0-9a-f]{7,40}(?![\w-])")


def looks_like_hash(token):
    return any(c.isdigit() for c in token) and any(c in "abcdef" for c in token)


def findings(text, name):
    out = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > MAX_LINES:
        out.append(f"{name}: {len(lines)} lines, at most {MAX_LINES}: keep current figures only "
                   "(history lives in git; long explanations belong in the guide they explain)")
    for number, line in enumerate(lines, 1):
        for m in ISSUE.finditer(line):
            out.append(f"{name}:{number}: names an issue number ({m.group(0)}): history lives in "
                       f"git: {line.strip()}")
        for m in HASH.finditer(line):
            if looks_like_hash(m.group(0)):
                out.append(f"{name}:{number}: names a commit hash ({m.group(0)}): history lives "
                           f"in git: {line.strip()}")
    return out


def self_test():
    clean = "\n".join([
        "| a | 1,212 ms | 0.4265 | 1e-05 | 128256 | 2026-11-28 18:44 UTC |",
        "workload b8f4f012-a32e-4356-b4e1-7665b3d598af, constant 0x9e3779b1, [x](#end-to-end-speed)",
        "words: facade, decade, deadbeef; sizes e384 fp8 h7168 i2048 &#8212;",
    ]) + "\n"
    bad = {
        "the speed of #27": "issue number (#27)",
        "measured at 52102ca": "commit hash (52102ca)",
        "(commit cece7ae, 2026-11-21)": "commit hash (cece7ae)",
        "full 40e6ca7844b514eb4b1c7edba6d6a7377df57870 here": "commit hash (40e6ca78",
    }
    failures = []
    if findings(clean, "clean"):
        failures.append(f"false positives: {findings(clean, 'clean')}")
    for line, want in bad.items():
        got = findings(line + "\n", "bad")
        if not any(want in g for g in got):
            failures.append(f"not caught: {line!r} (got {got})")
    long_page = "line\n" * (MAX_LINES + 1)
    if not findings(long_page, "long"):
        failures.append(f"a page of {MAX_LINES + 1} lines passes")
    if findings("line\n" * MAX_LINES, "full"):
        failures.append(f"a page of {MAX_LINES} lines fails")
    for f in failures:
        print(f)
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    path = sys.argv[1]
    with open(path, encoding="utf-8") as f:
        found = findings(f.read(), path)
    for line in found:
        print(line)
    if not found:
        print(f"{path}: a page of current figures")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

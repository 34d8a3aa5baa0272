#!/usr/bin/env bash
# Provides upstream flashinfer-bench's source at a pinned commit, for the test that loads what fib
# ships and writes with upstream's own pydantic data models (tests/tools/check_with_upstream_models.py),
# and makes sure python3 has pydantic (2.x), the one thing those models import.
#
# Prints the path of the source tree on stdout. Nothing is written inside the repository: the
# tree is kept in ${FIB_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/fib}/upstream/flashinfer-bench-<commit>.
# Where it comes from, in order:
#   FIB_UPSTREAM_SRC=DIR   a flashinfer-bench checkout, used as it is (the caller vouches for it);
#   FIB_UPSTREAM_GIT=DIR   a git repository (a clone or a mirror) that has the pinned commit;
#   otherwise             GitHub's tarball of the pinned commit (curl, or python3's urllib).
# Exits 1, saying why on stderr, when the source or pydantic cannot be had (e.g. offline).
set -euo pipefail

# flashinfer-bench HEAD of 2026-04-30 (PyPI's flashinfer-bench 0.1.2 predates its data models).
UPSTREAM_COMMIT=40e6ca7844b514eb4b1c7edba6d6a7377df57870
UPSTREAM_REPO=flashinfer-ai/flashinfer-bench

fail() {
  echo "upstream-models: $*" >&2
  exit 1
}

ensure_pydantic() {
  python3 -c 'import pydantic, sys; sys.exit(0 if pydantic.VERSION.startswith("2.") else 1)' \
    2>/dev/null && return 0
  echo "upstream-models: installing pydantic 2 (pip)" >&2
  # A Debian python3 refuses system-wide pip installs (PEP 668) unless told otherwise.
  python3 -m pip install --quiet "pydantic>=2,<3" >&2 ||
    python3 -m pip install --quiet --break-system-packages "pydantic>=2,<3" >&2 ||
    fail "python3 has no pydantic 2 and pip could not install it"
}

if [[ -n "${FIB_UPSTREAM_SRC:-}" ]]; then
  [[ -f "$FIB_UPSTREAM_SRC/flashinfer_bench/data/solution.py" ]] ||
    fail "FIB_UPSTREAM_SRC=$FIB_UPSTREAM_SRC is not a flashinfer-bench source tree"
  ensure_pydantic
  echo "$FIB_UPSTREAM_SRC"
  exit 0
fi

CACHE=${FIB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fib}/upstream
DEST="$CACHE/flashinfer-bench-$UPSTREAM_COMMIT"
if [[ ! -f "$DEST/flashinfer_bench/data/solution.py" ]]; then
  mkdir -p "$CACHE"
  WORK=$(mktemp -d "$CACHE/.fetch.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  if [[ -n "${FIB_UPSTREAM_GIT:-}" ]]; then
    git -C "$FIB_UPSTREAM_GIT" archive --format=tar "$UPSTREAM_COMMIT" |
      tar -x -C "$WORK" || fail "$FIB_UPSTREAM_GIT does not have commit $UPSTREAM_COMMIT"
  else
    URL="https://codeload.github.com/$UPSTREAM_REPO/tar.gz/$UPSTREAM_COMMIT"
    if command -v curl >/dev/null 2>&1; then
      curl -fsSL --max-time 120 "$URL" -o "$WORK/src.tar.gz" || fail "cannot download $URL"
    else
      python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
        "$URL" "$WORK/src.tar.gz" 2>/dev/null || fail "cannot download $URL"
    fi
    tar -xzf "$WORK/src.tar.gz" -C "$WORK" --strip-components=1 || fail "$URL: not a tarball"
    rm -f "$WORK/src.tar.gz"
  fi
  [[ -f "$WORK/flashinfer_bench/data/solution.py" ]] ||
    fail "the source of $UPSTREAM_COMMIT has no flashinfer_bench/data/solution.py"
  # Renamed into place last, so a tree in the cache is always a whole one.
  mv -T "$WORK" "$DEST" 2>/dev/null || [[ -f "$DEST/flashinfer_bench/data/solution.py" ]] ||
    fail "cannot move the source into $DEST"
fi
ensure_pydantic
echo "$DEST"

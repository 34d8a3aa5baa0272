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
#   otherwise             GitHub's tarball of the pinned commit (curl, or python3's urllib);
#   failing those         PyPI's released wheel (pip download), whose data models are the same.
# Exits 1, saying why on stderr, when the source or pydantic cannot be had (e.g. offline).
set -euo pipefail

# flashinfer-bench HEAD of 2026-04-30 (PyPI's flashinfer-bench 0.1.2 predates its data models).
UPSTREAM_COMMIT=40e6ca7844b514eb4b1c7edba6d6a7377df57870
UPSTREAM_REPO=flashinfer-ai/flashinfer-bench

# The released wheel, for machines that reach PyPI but not GitHub.
UPSTREAM_PYPI_VERSION=0.1.2

fail() {
  echo "upstream-models: $*" >&2
  exit 1
}

download() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL --max-time 120 "$1" -o "$2" 2>/dev/null
  else
    python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
      "$1" "$2" 2>/dev/null
  fi
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
PINNED="$CACHE/flashinfer-bench-$UPSTREAM_COMMIT"
RELEASED="$CACHE/flashinfer-bench-pypi-$UPSTREAM_PYPI_VERSION"

has_models() { [[ -f "$1/flashinfer_bench/data/solution.py" ]]; }

# Fills the folder $1 with the pinned commit's source; false when it cannot be had.
fetch_pinned() {
  if [[ -n "${FIB_UPSTREAM_GIT:-}" ]]; then
    git -C "$FIB_UPSTREAM_GIT" archive --format=tar "$UPSTREAM_COMMIT" | tar -x -C "$1"
    return
  fi
  local url="https://codeload.github.com/$UPSTREAM_REPO/tar.gz/$UPSTREAM_COMMIT"
  download "$url" "$1/src.tar.gz" && tar -xzf "$1/src.tar.gz" -C "$1" --strip-components=1 &&
    rm -f "$1/src.tar.gz"
}

# Fills the folder $1 with the released wheel's files. Where GitHub is out of reach but PyPI is
# not (a CI machine's registries), the release carries the same data models: its BuildSpec,
# Definition, Workload and Trace match the pinned commit's field for field.
fetch_released() {
  python3 -m pip download --quiet --no-deps --dest "$1" "flashinfer-bench==$UPSTREAM_PYPI_VERSION" >&2 &&
    python3 -m zipfile -e "$1"/flashinfer_bench-*.whl "$1"
}

# Unpacks with $2 into a fresh folder and renames it to $1 last, so a tree in the cache is
# always a whole one.
install_into() {
  local dest=$1 fetch=$2 work
  mkdir -p "$CACHE"
  work=$(mktemp -d "$CACHE/.fetch.XXXXXX")
  if "$fetch" "$work" && has_models "$work"; then
    mv -T "$work" "$dest" 2>/dev/null || has_models "$dest"
  else
    rm -rf "$work"
    return 1
  fi
}

if has_models "$PINNED" || install_into "$PINNED" fetch_pinned; then
  DEST=$PINNED
elif has_models "$RELEASED" || install_into "$RELEASED" fetch_released; then
  echo "upstream-models: commit $UPSTREAM_COMMIT unreachable; using PyPI's flashinfer-bench $UPSTREAM_PYPI_VERSION" >&2
  DEST=$RELEASED
else
  fail "neither upstream's commit $UPSTREAM_COMMIT nor PyPI's flashinfer-bench $UPSTREAM_PYPI_VERSION could be had"
fi
ensure_pydantic
echo "$DEST"

#!/usr/bin/env bash
# Here (a machine with network), before tools/upstream/upstream-side-by-side.sh runs on the GPU
# machine: puts upstream FlashInfer-Bench into .device-upstream/ (git-ignored, never committed;
# name it in the device call's `carry`, with .device-debs from scripts/device/prepare.sh):
#   .device-upstream/flashinfer-bench/  upstream's pure-Python package (flashinfer_bench/) and its
#                                       example dataset (examples/ffi/Example-FlashInfer-Trace/),
#                                       from UPSTREAM at REV (default HEAD); COMMIT names it
#   .device-upstream/wheels/            what upstream imports that the GPU machine's python3 lacks
#                                       (pydantic and its small dependencies, docstring-parser,
#                                       apache-tvm-ffi at the version fib builds against), for
#                                       that python (PY_VERSION, default 3.12)
# flashinfer-python is not carried: upstream's timer imports only flashinfer.testing, which
# tools/upstream/flashinfer_shim provides.
#   bash tools/upstream/prepare-upstream.sh UPSTREAM [REV]
# UPSTREAM: a git checkout or git directory of github.com/flashinfer-ai/flashinfer-bench.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
upstream=${1:?usage: prepare-upstream.sh UPSTREAM_GIT_DIR_OR_CHECKOUT [REV]}
rev=${2:-HEAD}
py_version=${PY_VERSION:-3.12}
tvm_ffi_version=$(sed -n 's/^TVM_FFI_VERSION=//p' "$root/scripts/install-deps.sh")
dest=$root/.device-upstream
git_of() { git --git-dir="$(git -C "$upstream" rev-parse --absolute-git-dir)" "$@"; }
commit=$(git_of rev-parse "$rev^{commit}")

rm -rf "$dest/flashinfer-bench"
mkdir -p "$dest/flashinfer-bench" "$dest/wheels"
git_of archive "$commit" flashinfer_bench examples/ffi/Example-FlashInfer-Trace LICENCE NOTICE \
  pyproject.toml | tar -x -C "$dest/flashinfer-bench"
echo "$commit" >"$dest/flashinfer-bench/COMMIT"
echo "prepare-upstream: flashinfer-bench $commit in $dest/flashinfer-bench"

wheels=(pydantic pydantic-core annotated-types typing-inspection docstring-parser
        "apache-tvm-ffi==$tvm_ffi_version")
rm -f "$dest"/wheels/*.whl
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$py_version" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$dest/wheels" "${wheels[@]}"
# pydantic pins pydantic-core exactly: a mismatch would fail only on the GPU machine.
pin=$(unzip -p "$dest"/wheels/pydantic-[0-9]*.whl '*/METADATA' |
      sed -n 's/^Requires-Dist: pydantic-core==\([^ ;]*\).*/\1/p')
compgen -G "$dest/wheels/pydantic_core-$pin-*.whl" >/dev/null ||
  { echo "prepare-upstream: pydantic wants pydantic-core $pin, not downloaded" >&2; exit 1; }
ls -1 "$dest/wheels" | sed 's/^/prepare-upstream: wheel /'
du -sh "$dest" | sed 's/^/prepare-upstream: size /'

#!/usr/bin/env bash
# Fails when fib's own C++ sources are not formatted with the repository's .clang-format.
# Exits 77 (CTest's SKIP_RETURN_CODE for the clang_format test) when clang-format is missing, so
# that an unchecked tree shows as skipped rather than as passing.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | grep -E '^(src|include|cli|tests|benchmarks|fuzz|examples|scripts|tools)/' || true)
if ! command -v clang-format >/dev/null; then
  echo "check-format: SKIPPED: clang-format is not installed"
  exit 77
fi
# shellcheck disable=SC2086
clang-format --dry-run --Werror $files
echo "check-format: $(echo "$files" | wc -l) files formatted"

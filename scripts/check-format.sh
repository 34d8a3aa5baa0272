#!/usr/bin/env bash
# Fails when fib's own C++ sources are not formatted with the repository's .clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | grep -E '^(src|include|cli|tests|bench|fuzz|examples)/' || true)
if ! command -v clang-format >/dev/null; then
  echo "check-format: SKIPPED: clang-format is not installed"
  exit 0
fi
# shellcheck disable=SC2086
clang-format --dry-run --Werror $files
echo "check-format: $(echo "$files" | wc -l) files formatted"

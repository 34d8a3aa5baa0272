#!/usr/bin/env bash
# Installs every Debian package fib needs to build and test. Safe to run repeatedly:
# it only calls apt-get when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang clang-format clang-tidy libclang-rt-14-dev   # fuzzing (libFuzzer) and formatting
  nlohmann-json3-dev   # JSON
  libcli11-dev         # command-line parsing
  libfmt-dev           # formatting
  libyaml-cpp-dev      # eval config files
  libxxhash-dev        # fast content hashing
  libssl-dev           # SHA-256 for content addressing
  libcpp-httplib-dev   # fib serve
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  python3
  python3-torch        # runs definitions' PyTorch references in the parity tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

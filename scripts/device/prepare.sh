#!/usr/bin/env bash
# Here (a Debian machine with network), before a device call: downloads the Debian -dev packages
# fib builds against, and bubblewrap for the workers' sandbox, into .device-debs/ (the GPU machine has nvcc, CMake and Ninja but reaches
# no package registry; scripts/device/gpu-check.sh unpacks them there), and copies the shared
# corpus (which the call does not send: it lies outside the checkout) into .device-shared/.
# Both folders are git-ignored and never committed; name both in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .device-debs
cd .device-debs
pkgs=(nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9 libyaml-cpp-dev libyaml-cpp0.7
      libxxhash-dev libxxhash0 libssl-dev libssl3 libgtest-dev libgmock-dev
      libbenchmark-dev libbenchmark1debian
      bubblewrap libcap2 libselinux1 libpcre2-8-0  # the worker sandbox: bwrap and its libraries
      libseccomp-dev libseccomp2  # the workers' seccomp filter
      libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev libbrotli1 zlib1g-dev  # fib serve
      libsqlite3-dev libsqlite3-0 pkg-config pkgconf pkgconf-bin libpkgconf3)
missing=()
for p in "${pkgs[@]}"; do compgen -G "${p}_*.deb" >/dev/null || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then apt-get download "${missing[@]}"; fi
ls -1 *.deb | wc -l | xargs echo "prepare: packages in .device-debs:"
# apache-tvm-ffi for the GPU machine's python3 (3.12 there; PY_VERSION overrides): fib's
# examples are tvm-ffi solutions, and env.sh installs the wheel before fib configures.
tvm_ffi_version=$(sed -n 's/^TVM_FFI_VERSION=//p' ../scripts/install-deps.sh)
mkdir -p wheels
compgen -G "wheels/apache_tvm_ffi-${tvm_ffi_version}-*.whl" >/dev/null ||
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "${PY_VERSION:-3.12}" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d wheels "apache-tvm-ffi==${tvm_ffi_version}"
ls -1 wheels | sed 's/^/prepare: wheel /'
cd ..
shared=${FIB_SHARED_DIR:-../shared}
if [ -d "$shared/corpus" ]; then
  rm -rf .device-shared
  mkdir -p .device-shared
  cp -r "$shared/corpus" .device-shared/corpus
  echo "prepare: corpus copied to .device-shared (git-ignored)"
else
  echo "prepare: no corpus at $shared/corpus; corpus tests will skip on the device"
fi

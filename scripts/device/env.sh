# Sourced on the GPU machine (by gpu-check.sh and device commands): unpacks the Debian packages
# carried in .device-debs (see prepare.sh) into /tmp/fib-deps once, points the compiler, CMake
# and the loader at them, and sets what scripts/build.sh needs there (no apt-get; warnings not
# fatal under that machine's newer compiler; the GPU's own architecture).
_fib_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
_fib_deps=/tmp/fib-deps
if [ ! -d "$_fib_deps/usr" ]; then
  for f in "$_fib_root"/.device-debs/*.deb; do dpkg -x "$f" "$_fib_deps"; done
fi
# The workers' sandbox: bubblewrap unpacked from the carried .deb where the host has none (fib
# finds it through FIB_BWRAP; it starts with a scrubbed environment, so it links the host's
# libselinux and libcap, which gpu-check.sh checks).
for f in "$_fib_root"/.device-debs/bubblewrap_*.deb; do
  [ -x "$_fib_deps/usr/bin/bwrap" ] || [ ! -f "$f" ] || dpkg -x "$f" "$_fib_deps"
done
if ! command -v bwrap >/dev/null && [ -x "$_fib_deps/usr/bin/bwrap" ]; then
  export FIB_BWRAP="$_fib_deps/usr/bin/bwrap"
fi
# tvm-ffi from the carried wheel (prepare.sh), where the host's python3 lacks it: fib's CMake
# asks python3 for its headers and library.
if ! python3 -c "import tvm_ffi" 2>/dev/null && compgen -G "$_fib_root/.device-debs/wheels/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fib-pysite \
    "$_fib_root"/.device-debs/wheels/*.whl >/dev/null 2>&1 || true
  export PYTHONPATH="/tmp/fib-pysite${PYTHONPATH:+:$PYTHONPATH}"
fi
export CMAKE_PREFIX_PATH="$_fib_deps/usr"
export CPATH="$_fib_deps/usr/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$_fib_deps/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$_fib_deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
FIB_GPU_ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
[ "$FIB_GPU_ARCH" = 90 ] && FIB_GPU_ARCH=90a
export FIB_GPU_ARCH
export FIB_SKIP_DEPS=1
# The worker starts with a scrubbed environment (no LD_LIBRARY_PATH): the binaries carry the path.
export FIB_CMAKE_ARGS="-DCMAKE_BUILD_RPATH=$_fib_deps/usr/lib/x86_64-linux-gnu -DFIB_WERROR=OFF -DFIB_CUDA=ON -DFIB_CUDA_ARCHITECTURES=${FIB_GPU_ARCH:-90a} -DFIB_SHARED_DIR=$_fib_root/.device-shared"

// The build step of `fib run`: compiles a solution into a shared object in a content-addressed
// cache (docs/solutions.md, "Building").
//
// A cache entry is `<cache_dir>/<key[0:2]>/<key>/` holding `src/` (the solution's sources),
// `include/fib/solution.h` (the ABI header it was compiled against), `solution.so`, `build.log`
// (every command line and the compiler's output) and `meta.json` (the key's inputs, toolchain,
// flags, time and status). The key hashes (xxh3-128) everything that decides the machine code:
// the ABI header's content, the toolchain's identity (resolved compiler paths, `--version`, the
// host CPU, the CUDA architectures or toolkit), the flags, the language, the entry point and
// every source path and content, but not the solution's name, author or description. Entries
// are built in a temporary folder and renamed into place under a lock, so concurrent builders
// of one key compile once; failed builds are cached too (a timeout or a crash of the compiler
// is not).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/bench/builder/python_runtime.h"
#include "fib/trace/solution.h"

namespace fib::bench {

// A compiler executable as fib runs it.
struct Compiler {
  std::vector<std::string> command;  // the program as found on PATH, then any words of $CXX
  std::filesystem::path resolved;    // the program with symlinks resolved
  std::string version;               // the first line of `<program> --version`

  // One line naming the compiler: "<version>, <resolved path>".
  std::string describe() const;
};

// Finds a compiler from a spec such as "c++", "/usr/bin/clang++" or "ccache g++" (a program,
// searched on PATH unless it contains a '/', then extra leading arguments). Runs `--version`
// once per program per process (cached by path, size and modification time; thread-safe).
// On failure returns nullopt and says why in *why.
std::optional<Compiler> find_compiler(std::string_view spec, std::string* why);

// How one kind of source file is compiled into an object.
struct CompileStep {
  std::string name;                     // "c++", "c", "cuda" (nvcc)
  std::vector<std::string> extensions;  // ".cpp", ".cc", ...
  Compiler compiler;
  std::vector<std::string> flags;  // before `-c <source> -o <object>`
};

// Everything that turns a solution's sources into a shared object. Commands run inside the
// entry's `src/` folder with relative paths; `-I../include` finds the ABI header, `-I.` the
// solution's own headers.
struct Toolchain {
  std::string id;      // "host-cpp", "cuda", "host-cpp-cuda"; names it in logs and meta.json
  std::string target;  // what the code is compiled for: the host CPU under -march=native, and
                       // the CUDA architectures (cuda) or toolkit (host-cpp-cuda)
  std::vector<CompileStep> steps;
  Compiler linker;
  std::vector<std::string> link_flags;         // after `-shared -o <so> <objects>`
  std::vector<std::string> header_extensions;  // written, never compiled (".h", ".hpp", ...)
  // How the entry symbol `name` is exported: the shared object's symbol is prefix + name
  // ("__tvm_ffi_" for binding tvm-ffi), written by this macro.
  std::string entry_prefix;
  std::string export_macro = "FIB_EXPORT_SOLUTION";

  // The step compiling `path` by its extension, or null (a header or another file).
  const CompileStep* step_for(std::string_view path) const;
  // What the cache key hashes: id, target, each compiler's identity and every flag.
  std::string identity() const;
  // One line for reports: "host-cpp (c++: <version>, <path>)".
  std::string describe() const;
};

// The sandbox the compilers of a build run in (bubblewrap, fib/bench/builder/bwrap.h): they see
// the build's own folder (the staged copy of the solution's sources, fib's ABI header, the
// objects; read-write), the toolchains (/usr with CUDA under /usr/local/cuda, the loader's
// cache, every folder the toolchain's flags and compilers name: tvm-ffi's headers and library,
// a CUDA toolkit, cuDNN or CUTLASS elsewhere), `read_only`, and a private /tmp; no $HOME, no
// dataset, no other entry of the build cache, no network. The key of a sandboxed build differs
// from an unsandboxed one's, so neither answers for the other.
struct BuildSandbox {
  std::filesystem::path bwrap;  // empty: the compilers run unsandboxed, as fib's user
  std::vector<std::filesystem::path> read_only;  // more toolchain folders (a Python prefix)
  bool enabled() const { return !bwrap.empty(); }
};

struct BuildOptions {
  std::filesystem::path cache_dir;         // empty: default_cache_dir()
  std::filesystem::path abi_include_dir;   // holds fib/solution.h (fib's include/); required
  std::vector<std::string> extra_flags;    // appended to every compile command, nvcc's too
                                           // (in the key)
  std::vector<std::string> extra_ldflags;  // appended to the link command (in the key)
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // the whole build
  bool force = false;  // rebuild even when the cache holds the key (success or failure)
  std::string cxx;     // C++ compiler spec; empty: $CXX, else "c++"
  std::string cc;      // C compiler spec (only for .c sources); empty: $CC, else "cc"
  // The CUDA architectures device code is built for, as nvcc names them without "sm_": "90a"
  // (Hopper with its arch-specific features), "80", "100a" (see cuda_architecture_for). Empty:
  // $FIB_CUDA_ARCH (e.g. "90a" or "80,90a"); a CUDA solution with neither fails to build.
  std::vector<std::string> cuda_architectures;
  // nvcc spec (GPU solutions); empty: $FIB_NVCC, else $CUDACXX, else nvcc on PATH, else
  // /usr/local/cuda/bin/nvcc. The CUDA toolkit used (headers, libcudart, libcublas) is nvcc's.
  std::string nvcc;
  // The python of solutions that run in the Python runtime (find_python); empty:
  // $FIB_PYTHON, else the first python3 that imports torch.
  std::string python;
  BuildSandbox sandbox;  // where the compilers run (the torch extension builder's python too)
};

enum class BuildStatus {
  kBuilt,        // compiled now
  kCached,       // found in the cache; nothing was compiled
  kFailed,       // compile or link error, missing entry symbol, bad sources, timeout, ...
  kUnsupported,  // a language or binding this build cannot compile (the caller skips it)
};
const char* to_string(BuildStatus s);

struct BuildResult {
  BuildStatus status = BuildStatus::kFailed;
  std::string message;                  // one line: why it failed or is unsupported
  std::filesystem::path shared_object;  // when ok(): the shared object to load
  std::filesystem::path directory;      // the cache entry, when there is one
  std::string key;                      // 32 hex digits (empty when no key was computed)
  std::string log;                      // command lines and compiler output
  double seconds = 0;                   // wall time of this call
  double build_seconds = 0;             // time the compile took (for a cached entry: then)
  bool from_cache = false;              // kCached, or kFailed read from a cached failure
  std::string toolchain;                // Toolchain::describe()
  std::vector<std::string> flags;       // the compile flags of the entry file's step (c++, cuda)
  std::vector<std::string> link_flags;
  // The runtime the solution runs in, for solutions of the Python runtime (python, triton,
  // tilelang, binding torch).
  std::optional<PythonRuntime> python;
  bool sandboxed = false;  // compiled in the build sandbox (BuildSandbox), or found built there

  bool ok() const { return status == BuildStatus::kBuilt || status == BuildStatus::kCached; }
};

// $FIB_CACHE_DIR, else $XDG_CACHE_HOME/fib/build, else ~/.cache/fib/build.
std::filesystem::path default_cache_dir();

// Whether `s` runs on a GPU (gets device pointers and fib::stream()): language "cuda", or any
// target_hardware entry other than "cpu" (compared case-insensitively), e.g. "NVIDIA_H100".
bool solution_targets_gpu(const Solution& s);
// Whether `s` runs on the CPU (gets host memory): not CUDA, and its target_hardware is empty or
// names "cpu". Upstream's field lists every hardware a solution is compatible with, so a portable
// solution (["cpu", "cuda"]) runs on CPU lanes and on GPU lanes alike.
bool solution_runs_on_cpu(const Solution& s);

// The architecture to build for a device of compute capability major.minor: "90a", "100a" and
// "120a" for 9.0, 10.0 and 12.0 (their arch-specific features, which run only on exactly that
// capability), else "<major><minor>" ("80" for 8.0, "89" for 8.9).
std::string cuda_architecture_for(int major, int minor);

// The toolchain that builds `s` with `o`, or nullopt when the solution's language or binding is
// not supported (*unsupported says so) or a compiler, the CUDA toolkit or the architectures are
// missing (*error says so). Supported, each with binding "fib" (fib/solution.h) or "tvm-ffi"
// (the default; tvm-ffi's headers, libtvm_ffi.so linked with its RUNPATH):
//   - language "cpp" for the CPU ("host-cpp": .cpp/.cc/.cxx with $CXX, .c with $CC);
//   - language "cpp" for a GPU target_hardware ("host-cpp-cuda": the same, plus the CUDA
//     headers and link flags for libcudart and libcublas of nvcc's toolkit);
//   - language "cuda" ("cuda": .cu with nvcc for o.cuda_architectures, host files as in
//     host-cpp-cuda, linked by the C++ compiler).
// A new language is a new case here (its steps, flags and link flags); the rest of the build
// does not change.
std::optional<Toolchain> select_toolchain(const Solution& s, const BuildOptions& o,
                                          std::string* unsupported, std::string* error);

// The cache key of `s` built by `tc` against the given ABI header text, in the build sandbox
// or not.
std::string build_key(const Solution& s, const Toolchain& tc, std::string_view abi_header,
                      bool sandboxed = false);

// Builds (or finds in the cache) the shared object of a solution. Never throws for a bad
// solution or a failing compiler; thread-safe, and safe across processes sharing a cache.
BuildResult build_solution(const Solution& s, const BuildOptions& o);

}  // namespace fib::bench

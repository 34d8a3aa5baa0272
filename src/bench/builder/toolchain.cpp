// Compilers and toolchains: finding a compiler and its identity, the host CPU a -march=native
// build targets, nvcc and its CUDA toolkit, and the toolchain of each supported language.
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <xxhash.h>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "dependencies.h"
#include "fib/bench/builder/build.h"
#include "fib/bench/builder/process.h"

namespace fib::bench {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

bool is_executable_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::optional<fs::path> find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    std::error_code ec;
    fs::path p = fs::absolute(program, ec);
    if (ec || !is_executable_file(p)) return std::nullopt;
    return p;
  }
  const char* env = std::getenv("PATH");
  const std::string path = env != nullptr && *env != '\0' ? env : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (is_executable_file(candidate)) {
      std::error_code ec;
      fs::path abs = fs::absolute(candidate, ec);
      return ec ? candidate : abs;
    }
    start = end + 1;
  }
  return std::nullopt;
}

std::string first_line(std::string_view text) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (!line.empty()) return std::string(line);
    start = end + 1;
  }
  return {};
}

// The host CPU: machine, model and a hash of its feature flags (what -march=native decides).
const std::string& host_target() {
  static const std::string target = [] {
    utsname u{};
    std::string machine = ::uname(&u) == 0 ? u.machine : "unknown";
    std::string model, features;
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string field = line.substr(0, colon);
      while (!field.empty() && (field.back() == ' ' || field.back() == '\t')) field.pop_back();
      const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
      if (model.empty() && (field == "model name" || field == "CPU part")) model = value;
      if (features.empty() && (field == "flags" || field == "Features")) features = value;
      if (!model.empty() && !features.empty()) break;
    }
    return fmt::format("{} {} (cpu flags {:016x})", machine, model.empty() ? "cpu" : model,
                       XXH3_64bits(features.data(), features.size()));
  }();
  return target;
}

// The line of `--version` output that names the version: the first, except for nvcc, whose
// first line names the driver and whose "release" line names the toolkit's version.
std::string version_line(std::string_view text) {
  const std::string first = first_line(text);
  if (first.find("Cuda compiler driver") == std::string::npos) return first;
  std::string release;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    if (line.find("release") != std::string::npos) release = line;
  }
  while (!release.empty() && (release.back() == '\r' || release.back() == ' ')) release.pop_back();
  return release.empty() ? first : release;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// "90a", "80", "100f" (nvcc's names without "sm_"; "sm_90a" is taken too); nullopt otherwise.
std::optional<std::string> parse_architecture(std::string_view a) {
  if (a.rfind("sm_", 0) == 0) a.remove_prefix(3);
  std::size_t digits = 0;
  while (digits < a.size() && a[digits] >= '0' && a[digits] <= '9') ++digits;
  const std::string_view suffix = a.substr(digits);
  if (digits < 2 || digits > 3 || a[0] == '0' ||
      !(suffix.empty() || suffix == "a" || suffix == "f")) {
    return std::nullopt;
  }
  return std::string(a);
}

// The architectures a CUDA build targets: BuildOptions::cuda_architectures, else $FIB_CUDA_ARCH;
// checked, without duplicates, in numeric order (so the order they are given in does not
// change the key).
std::optional<std::vector<std::string>> cuda_architectures(const BuildOptions& o,
                                                           std::string* error) {
  std::vector<std::string> given = o.cuda_architectures;
  std::string origin = "BuildOptions::cuda_architectures";
  if (given.empty()) {
    const std::string env = env_or_empty("FIB_CUDA_ARCH");
    std::string word;
    for (char c : env + ",") {
      if (c == ',' || c == ';' || c == ' ' || c == '\t') {
        if (!word.empty()) given.push_back(word);
        word.clear();
      } else {
        word += c;
      }
    }
    origin = "$FIB_CUDA_ARCH";
  }
  if (given.empty()) {
    *error =
        "no CUDA architecture to build for: BuildOptions::cuda_architectures is empty and "
        "$FIB_CUDA_ARCH is not set (fib run takes it from the device of --device cuda:N; "
        "elsewhere set FIB_CUDA_ARCH, e.g. FIB_CUDA_ARCH=90a for H100/H200 or 100a for B200)";
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& g : given) {
    auto a = parse_architecture(g);
    if (!a) {
      *error = fmt::format(
          "{}: '{}' is not a CUDA architecture (expected nvcc's name without sm_, such as 80, "
          "90a or 100a)",
          origin, g);
      return std::nullopt;
    }
    if (std::find(out.begin(), out.end(), *a) == out.end()) out.push_back(std::move(*a));
  }
  std::sort(out.begin(), out.end(), [](const std::string& x, const std::string& y) {
    const int nx = std::stoi(x), ny = std::stoi(y);
    return nx != ny ? nx < ny : x < y;
  });
  return out;
}

// The CUDA toolkit of the nvcc fib uses: nvcc itself, its headers and its libraries.
struct CudaToolkit {
  Compiler nvcc;
  fs::path root;  // nvcc's bin/..
  fs::path include_dir;
  fs::path lib_dir;  // holds libcudart.so
};

std::optional<CudaToolkit> find_cuda_toolkit(const BuildOptions& o, std::string* error) {
  constexpr const char* kDefault = "/usr/local/cuda/bin/nvcc";
  constexpr const char* kHow = "point fib at nvcc with $FIB_NVCC or $CUDACXX, or put it on PATH";
  std::string spec, origin;
  if (!o.nvcc.empty()) {
    spec = o.nvcc;
    origin = "BuildOptions::nvcc";
  } else if (const std::string v = env_or_empty("FIB_NVCC"); !v.empty()) {
    spec = v;
    origin = "$FIB_NVCC";
  } else if (const std::string v2 = env_or_empty("CUDACXX"); !v2.empty()) {
    spec = v2;
    origin = "$CUDACXX";
  } else if (find_program("nvcc")) {
    spec = "nvcc";
    origin = "PATH";
  } else if (is_executable_file(kDefault)) {
    spec = kDefault;
    origin = "the default location";
  } else {
    *error = fmt::format(
        "nvcc not found: BuildOptions::nvcc, $FIB_NVCC and $CUDACXX are unset, there is no nvcc "
        "on PATH and no {} (install the CUDA toolkit, or {})",
        kDefault, kHow);
    return std::nullopt;
  }
  std::string why;
  auto nvcc = find_compiler(spec, &why);
  if (!nvcc) {  // a named nvcc that is missing is not replaced by another one
    *error = fmt::format("nvcc (from {}): {} ({})", origin, why, kHow);
    return std::nullopt;
  }
  CudaToolkit tk;
  tk.root = nvcc->resolved.parent_path().parent_path();
  tk.nvcc = std::move(*nvcc);
  utsname u{};
  const std::string machine = ::uname(&u) == 0 ? u.machine : "x86_64";
  const fs::path targets = tk.root / "targets" / (machine + "-linux");
  std::error_code ec;
  for (const fs::path& dir : {tk.root / "include", targets / "include"}) {
    if (fs::is_regular_file(dir / "cuda_runtime.h", ec)) {
      tk.include_dir = dir;
      break;
    }
  }
  // lib64 in NVIDIA's layout; the others in distributions' packages of the toolkit.
  const std::vector<fs::path> lib_dirs = {tk.root / "lib64", targets / "lib",
                                          tk.root / "lib" / (machine + "-linux-gnu"),
                                          tk.root / "lib"};
  for (const fs::path& dir : lib_dirs) {
    if (fs::exists(dir / "libcudart.so", ec)) {
      tk.lib_dir = dir;
      break;
    }
  }
  if (tk.include_dir.empty() || tk.lib_dir.empty()) {
    *error = fmt::format(
        "the CUDA toolkit of nvcc {} (from {}) is incomplete: no {} under {} (point fib at the "
        "nvcc of a complete toolkit with $FIB_NVCC)",
        tk.nvcc.resolved.string(), origin,
        tk.include_dir.empty() ? "include/cuda_runtime.h" : "lib64/libcudart.so", tk.root.string());
    return std::nullopt;
  }
  return tk;
}

struct CacheEntry {
  std::uintmax_t size = 0;
  std::int64_t mtime_ns = 0;
  Compiler compiler;
};

std::mutex g_compilers_mutex;
std::map<std::string, CacheEntry>& compilers_cache() {
  static std::map<std::string, CacheEntry> cache;
  return cache;
}

}  // namespace

std::string Compiler::describe() const { return fmt::format("{}, {}", version, resolved.string()); }

std::optional<Compiler> find_compiler(std::string_view spec, std::string* why) {
  std::string ignored;
  if (why == nullptr) why = &ignored;
  std::vector<std::string> words = split_words(spec);
  if (words.empty()) {
    *why = "no compiler given";
    return std::nullopt;
  }
  const auto found = find_program(words[0]);
  if (!found) {
    *why = words[0].find('/') != std::string::npos
               ? fmt::format("compiler '{}' is not an executable file", words[0])
               : fmt::format("compiler '{}' is not found on PATH", words[0]);
    return std::nullopt;
  }
  struct stat st {};
  if (::stat(found->c_str(), &st) != 0) {
    *why = fmt::format("cannot stat {}", found->string());
    return std::nullopt;
  }
  const auto size = static_cast<std::uintmax_t>(st.st_size);
  const std::int64_t mtime_ns = std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  words[0] = found->string();
  std::string cache_key;
  for (const auto& w : words) cache_key += w + '\0';
  {
    std::lock_guard lock(g_compilers_mutex);
    auto it = compilers_cache().find(cache_key);
    if (it != compilers_cache().end() && it->second.size == size &&
        it->second.mtime_ns == mtime_ns) {
      return it->second.compiler;
    }
  }
  Compiler c;
  c.command = words;
  std::error_code ec;
  c.resolved = fs::canonical(*found, ec);
  if (ec) c.resolved = *found;
  std::vector<std::string> argv = words;
  argv.emplace_back("--version");
  const auto r = detail::run_process(
      argv, {}, std::chrono::steady_clock::now() + std::chrono::seconds(60), std::size_t{64} << 10);
  if (!r.succeeded()) {
    *why = fmt::format("`{}` failed{}{}", detail::shell_join(argv), r.started ? "" : ": " + r.error,
                       r.output.empty() ? "" : ": " + first_line(r.output));
    return std::nullopt;
  }
  c.version = version_line(r.output);
  if (c.version.empty()) c.version = "unknown version";
  std::lock_guard lock(g_compilers_mutex);
  compilers_cache()[cache_key] = CacheEntry{size, mtime_ns, c};
  return c;
}

const CompileStep* Toolchain::step_for(std::string_view path) const {
  for (const auto& step : steps) {
    for (const auto& ext : step.extensions) {
      if (path.size() > ext.size() && path.substr(path.size() - ext.size()) == ext) return &step;
    }
  }
  return nullptr;
}

std::string Toolchain::identity() const {
  std::string out = fmt::format("toolchain {}\ntarget {}\n", id, target);
  auto add_compiler = [&](std::string_view role, const Compiler& c) {
    out += fmt::format("{} {} | {} | {}\n", role, fmt::join(c.command, " "), c.resolved.string(),
                       c.version);
  };
  for (const auto& step : steps) {
    add_compiler("compiler." + step.name, step.compiler);
    out += fmt::format("extensions.{} {}\n", step.name, fmt::join(step.extensions, " "));
    for (const auto& f : step.flags) out += fmt::format("flag.{} {}\n", step.name, f);
  }
  add_compiler("linker", linker);
  for (const auto& f : link_flags) out += fmt::format("flag.link {}\n", f);
  return out;
}

std::string Toolchain::describe() const {
  std::vector<std::string> parts;
  for (const auto& step : steps) parts.push_back(step.name + ": " + step.compiler.describe());
  return fmt::format("{} ({})", id, fmt::join(parts, "; "));
}

bool solution_targets_gpu(const Solution& s) {
  if (s.spec.language == "cuda") return true;
  for (const auto& hw : s.spec.target_hardware) {
    if (lower(hw) != "cpu") return true;
  }
  return false;
}

bool solution_runs_on_cpu(const Solution& s) {
  if (s.spec.language == "cuda") return false;
  if (s.spec.target_hardware.empty()) return true;
  return std::any_of(s.spec.target_hardware.begin(), s.spec.target_hardware.end(),
                     [](const std::string& hw) { return lower(hw) == "cpu"; });
}

std::string cuda_architecture_for(int major, int minor) {
  // sm_90a, sm_100a and sm_120a unlock wgmma, tcgen05 and the like; their code runs only on
  // exactly that capability, which is what fib builds for (the device it runs on).
  if (minor == 0 && (major == 9 || major == 10 || major == 12)) return fmt::format("{}0a", major);
  return fmt::format("{}{}", major, minor);
}

#ifdef FIB_HAVE_TVM_FFI
// Binding tvm-ffi: the package's headers for every step, libtvm_ffi.so linked with a RUNPATH
// (the worker loads the solution with its dependencies; fib itself does not link tvm-ffi), the
// entry exported by TVM_FFI_DLL_EXPORT_TYPED_FUNC as __tvm_ffi_<name>. The version is part of
// the target, so a different tvm-ffi is a different cache key.
static void use_tvm_ffi(Toolchain& tc) {
  const std::string include = std::string("-I") + FIB_TVM_FFI_INCLUDE_DIR;
  for (auto& step : tc.steps) step.flags.push_back(include);
  const std::string lib = FIB_TVM_FFI_LIB_DIR;
  tc.link_flags.insert(tc.link_flags.end(), {"-L" + lib, "-Wl,-rpath," + lib, "-ltvm_ffi"});
  tc.target += fmt::format("; tvm-ffi {}", FIB_TVM_FFI_VERSION);
  tc.entry_prefix = "__tvm_ffi_";
  tc.export_macro = "TVM_FFI_DLL_EXPORT_TYPED_FUNC";
}
#endif

namespace {

// Why fib's toolchains do not build a solution of this language and binding ("unsupported:
// ..."), or empty when they do.
std::string unsupported_reason(const std::string& language, const std::string& binding) {
  if (language != "cpp" && language != "cuda") {
    return fmt::format(
        "unsupported: language '{}' (fib compiles 'cpp' and 'cuda'; 'python', 'triton' and "
        "'tilelang' run in the Python runtime, which build_solution stages them for)",
        language);
  }
  if (binding == "torch") {
    return fmt::format(
        "unsupported: binding 'torch' (a PyTorch extension) is built by torch.utils.cpp_extension "
        "in the Python runtime (build_solution), not by a toolchain of fib's");
  }
  if (binding != "fib" && binding != "tvm-ffi") {
    return fmt::format(
        "unsupported: binding '{}' for language '{}' (fib builds bindings 'tvm-ffi' and 'fib')",
        binding, language);
  }
#ifndef FIB_HAVE_TVM_FFI
  if (binding == "tvm-ffi") {
    return "unsupported: binding 'tvm-ffi' needs the apache-tvm-ffi package, which was not found "
           "when this fib was built (scripts/install-deps.sh installs it)";
  }
#endif
  return {};
}

// The compiler given by an option, else by the environment variable, else the fallback.
std::string compiler_spec(const std::string& given, const char* env, const char* fallback) {
  if (!given.empty()) return given;
  const char* v = std::getenv(env);
  return std::string(v != nullptr && *v != '\0' ? v : fallback);
}

// A solution that runs on a GPU or names CUDA libraries (cublas, cudnn, cutlass) needs the
// toolkit they sit beside: finds it and the libraries' flags (naming them in tc's target).
// False, with *error or *unsupported said, when either is missing.
bool find_cuda_support(const Solution& s, const BuildOptions& o, Toolchain& tc,
                       std::optional<CudaToolkit>* toolkit, detail::DependencyFlags* deps,
                       std::string* unsupported, std::string* error) {
  const bool cuda_libraries = std::any_of(s.spec.dependencies.begin(), s.spec.dependencies.end(),
                                          detail::names_cuda_library);
  if (!solution_targets_gpu(s) && !cuda_libraries) return true;
  *toolkit = find_cuda_toolkit(o, error);
  if (!*toolkit) return false;
  auto found = detail::cuda_library_flags(s.spec.dependencies, (*toolkit)->include_dir,
                                          (*toolkit)->lib_dir, unsupported);
  if (!found) return false;
  *deps = std::move(*found);
  if (!deps->found.empty()) tc.target += fmt::format("; with {}", fmt::join(deps->found, ", "));
  return true;
}

// The flags every host step compiles with. Relative include paths: commands run in the entry's
// src/ folder, so diagnostics name the sources as the solution does and the entry stays valid
// after it is renamed into place.
std::vector<std::string> common_flags(const std::optional<CudaToolkit>& toolkit,
                                      const detail::DependencyFlags& deps) {
  std::vector<std::string> common = {
      "-O3", "-march=native", "-fPIC", "-pthread", "-fvisibility=hidden", "-I../include", "-I."};
  if (toolkit) common.push_back("-I" + toolkit->include_dir.string());  // cuda_runtime.h
  common.insert(common.end(), deps.compile.begin(), deps.compile.end());
  return common;
}

bool has_c_sources(const Solution& s) {
  return std::any_of(s.sources.begin(), s.sources.end(), [](const auto& src) {
    return src.path.size() > 2 && src.path.substr(src.path.size() - 2) == ".c";
  });
}

// The C++ step, and the C step when the solution has C sources (the C compiler joins the key
// only then); false, with *error said, when the C compiler is missing.
bool add_host_steps(const Solution& s, const BuildOptions& o, const Compiler& cxx,
                    const std::vector<std::string>& common, Toolchain& tc, std::string* error) {
  CompileStep cpp{"c++", {".cpp", ".cc", ".cxx"}, cxx, {"-std=c++17"}};
  cpp.flags.insert(cpp.flags.end(), common.begin(), common.end());
  cpp.flags.insert(cpp.flags.end(), o.extra_flags.begin(), o.extra_flags.end());
  tc.steps.push_back(std::move(cpp));
  if (!has_c_sources(s)) return true;
  std::string why;
  auto cc = find_compiler(compiler_spec(o.cc, "CC", "cc"), &why);
  if (!cc) {
    *error = "C compiler: " + why + " (set CC)";
    return false;
  }
  CompileStep c{"c", {".c"}, *cc, {"-std=c11"}};
  c.flags.insert(c.flags.end(), common.begin(), common.end());
  c.flags.insert(c.flags.end(), o.extra_flags.begin(), o.extra_flags.end());
  tc.steps.push_back(std::move(c));
  return true;
}

// The link flags before tvm-ffi's and the user's.
void add_link_flags(Toolchain& tc, const std::optional<CudaToolkit>& toolkit,
                    const detail::DependencyFlags& deps) {
  // Full RELRO and immediate binding: the solution's GOT is read-only once loaded, so rewriting
  // an entry takes an explicit mprotect (the parent's timer cross-check covers that case).
  tc.link_flags = {"-Wl,--no-undefined", "-Wl,-z,relro,-z,now", "-lm", "-pthread"};
  if (!toolkit) return;
  const std::string lib = toolkit->lib_dir.string();
  // The shared runtime, found at run time through the RUNPATH; cuBLAS only when the solution
  // calls it (--as-needed drops an unused library from the shared object's dependencies).
  tc.link_flags.insert(tc.link_flags.end(), {"-L" + lib, "-Wl,-rpath," + lib, "-lcudart",
                                             "-Wl,--as-needed", "-lcublas", "-Wl,--no-as-needed"});
  // The driver API (cuTensorMapEncodeTiled for TMA, cuLaunchKernelEx, ...), which upstream
  // links for every CUDA solution: against the toolkit's stub (the driver's libcuda.so.1 is
  // loaded at run time), a dependency only of solutions that call it.
  const fs::path stubs = toolkit->lib_dir / "stubs";
  std::error_code ec;
  if (fs::exists(stubs / "libcuda.so", ec)) {
    tc.link_flags.insert(tc.link_flags.end(), {"-L" + stubs.string(), "-Wl,--as-needed", "-lcuda",
                                               "-Wl,--no-as-needed"});
  }
  tc.link_flags.insert(tc.link_flags.end(), deps.link.begin(), deps.link.end());
}

// The nvcc step, first of the steps, for the architectures `archs`; false, with *error said,
// when the C++ compiler cannot be nvcc's host compiler.
bool add_nvcc_step(const BuildOptions& o, const Compiler& cxx, const std::string& cxx_spec,
                   const CudaToolkit& toolkit, const std::vector<std::string>& archs,
                   const detail::DependencyFlags& deps, Toolchain& tc, std::string* error) {
  // nvcc compiles host code with -ccbin, a single program: the C++ compiler whose identity is
  // in the key must be the one it runs, so a launcher such as "ccache g++" cannot be used. It
  // gets the path as found, not as resolved: a compiler reached through a symlink may act by
  // its name (clang++ -> clang, a ccache masquerade link -> ccache); both are in the key.
  if (cxx.command.size() != 1) {
    *error = fmt::format(
        "C++ compiler '{}' is a command of several words, but nvcc's host compiler (-ccbin) is "
        "one program (set CXX to the compiler's path for CUDA builds)",
        cxx_spec);
    return false;
  }
  tc.id = "cuda";
  std::vector<std::string> sm;
  for (const auto& a : archs) sm.push_back("sm_" + a);
  tc.target = fmt::format("{} (nvcc); host {}", fmt::join(sm, ", "), tc.target);
  CompileStep nvcc{"cuda", {".cu"}, toolkit.nvcc, {"-ccbin", cxx.command.front()}};
  nvcc.flags.insert(nvcc.flags.end(), {"-std=c++17", "-O3"});
  for (const auto& a : archs) {
    nvcc.flags.push_back(fmt::format("-gencode=arch=compute_{0},code=sm_{0}", a));
  }
  nvcc.flags.insert(nvcc.flags.end(), {"-Xcompiler=-fPIC,-fvisibility=hidden", "-I../include",
                                       "-I.", "--expt-relaxed-constexpr", "-lineinfo"});
  nvcc.flags.insert(nvcc.flags.end(), deps.compile.begin(), deps.compile.end());
#ifdef FIB_HAVE_TVM_FFI
  if (!tc.entry_prefix.empty()) nvcc.flags.push_back(std::string("-I") + FIB_TVM_FFI_INCLUDE_DIR);
#endif
  nvcc.flags.insert(nvcc.flags.end(), o.extra_flags.begin(), o.extra_flags.end());
  tc.steps.insert(tc.steps.begin(), std::move(nvcc));
  return true;
}

}  // namespace

std::optional<Toolchain> select_toolchain(const Solution& s, const BuildOptions& o,
                                          std::string* unsupported, std::string* error) {
  std::string ignored_u, ignored_e;
  if (unsupported == nullptr) unsupported = &ignored_u;
  if (error == nullptr) error = &ignored_e;
  const std::string& language = s.spec.language;
  const std::string binding = s.spec.binding_or_default();
  // Support is decided before any compiler is looked for: an unsupported solution is skipped
  // whatever the machine has.
  if (std::string reason = unsupported_reason(language, binding); !reason.empty()) {
    *unsupported = std::move(reason);
    return std::nullopt;
  }
  const bool cuda = language == "cuda";
  std::vector<std::string> archs;
  if (cuda) {  // before the compilers: the cheapest thing to be missing, and the likeliest
    auto found = cuda_architectures(o, error);
    if (!found) return std::nullopt;
    archs = std::move(*found);
  }
  Toolchain tc;
  tc.id = "host-cpp";
  tc.target = host_target();
  tc.header_extensions = {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".ipp", ".tpp"};
  std::string why;
  const std::string cxx_spec = compiler_spec(o.cxx, "CXX", "c++");
  auto cxx = find_compiler(cxx_spec, &why);
  if (!cxx) {
    *error = "C++ compiler: " + why + " (set CXX)";
    return std::nullopt;
  }
  std::optional<CudaToolkit> toolkit;
  detail::DependencyFlags deps;
  if (!find_cuda_support(s, o, tc, &toolkit, &deps, unsupported, error) ||
      !add_host_steps(s, o, *cxx, common_flags(toolkit, deps), tc, error)) {
    return std::nullopt;
  }
  tc.linker = *cxx;
  add_link_flags(tc, toolkit, deps);
#ifdef FIB_HAVE_TVM_FFI
  if (binding == "tvm-ffi") use_tvm_ffi(tc);
#endif
  tc.link_flags.insert(tc.link_flags.end(), o.extra_ldflags.begin(), o.extra_ldflags.end());
  if (!toolkit) return tc;

  if (!cuda) {  // C++ calling the CUDA runtime: no device code, so no architectures
    tc.id = "host-cpp-cuda";
    tc.target = fmt::format("{}; CUDA toolkit {} ({})", tc.target, toolkit->root.string(),
                            toolkit->nvcc.version);
    return tc;
  }
  if (!add_nvcc_step(o, *cxx, cxx_spec, *toolkit, archs, deps, tc, error)) return std::nullopt;
  return tc;
}

}  // namespace fib::bench

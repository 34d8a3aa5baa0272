// The CUDA libraries named by a solution's dependencies: parsing the names, finding each
// library's headers (and shared libraries), reading its version and making the flags.
#include "dependencies.h"

#include <fmt/format.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace fib::bench::detail {

namespace {

namespace fs = std::filesystem;

enum class Pin { kAny, kExact, kAtLeast };

struct Request {
  std::string text;  // as the solution wrote it
  std::string library;
  Pin pin = Pin::kAny;
  std::vector<int> version;
};

struct Library {
  std::string_view name;            // as dependencies name it
  std::string_view display;         // as its vendor does
  std::string_view header;          // relative to the include folder
  std::string_view version_header;  // the header whose #defines give the version
  std::vector<std::string_view> version_macros;
  std::vector<std::string_view> libs;  // shared libraries to link ("cublas" for libcublas.so)
  std::vector<const char*> env;        // variables naming the library's folder, in order
  std::vector<fs::path> extra_roots;   // where it is installed outside the system's folders
};

const std::vector<Library>& libraries() {
  static const std::vector<Library> all = {
      {"cublas",
       "cuBLAS",
       "cublas_v2.h",
       "cublas_api.h",
       {"CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH"},
       {"cublas", "cublasLt"},
       {},
       {}},
      {"cudnn",
       "cuDNN",
       "cudnn.h",
       "cudnn_version.h",
       {"CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"},
       {"cudnn"},
       {"FIB_CUDNN_DIR", "CUDNN_HOME"},
       {"/usr/local/cudnn"}},
      {"cutlass",
       "CUTLASS",
       "cutlass/cutlass.h",
       "cutlass/version.h",
       {"CUTLASS_MAJOR", "CUTLASS_MINOR", "CUTLASS_PATCH"},
       {},
       {"FIB_CUTLASS_DIR", "CUTLASS_HOME", "CUTLASS_DIR"},
       {"/usr/local/cutlass", "/opt/cutlass"}},
  };
  return all;
}

// "3_7", "3.5.1", "9": the numbers; nullopt for anything else.
std::optional<std::vector<int>> parse_version(std::string_view s) {
  std::vector<int> out;
  std::size_t i = 0;
  while (i < s.size()) {
    int v = 0, digits = 0;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) != 0; ++i, ++digits) {
      v = v * 10 + (s[i] - '0');
      if (digits == 6) return std::nullopt;
    }
    if (digits == 0) return std::nullopt;
    out.push_back(v);
    if (i < s.size() && (s[i] == '_' || s[i] == '.') && i + 1 < s.size()) {
      ++i;
    } else if (i < s.size()) {
      return std::nullopt;
    }
  }
  if (out.empty()) return std::nullopt;
  return out;
}

// "cublas", "CUTLASS_3_7", "cutlass-3.5", "cudnn9", "cudnn >= 9.1", "cutlass==3.7"; nullopt for
// names of other things.
std::optional<Request> parse_request(std::string_view text) {
  std::string s;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) {
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  for (const Library& lib : libraries()) {
    if (s.rfind(lib.name, 0) != 0) continue;
    std::string_view rest = std::string_view(s).substr(lib.name.size());
    Request r{std::string(text), std::string(lib.name), Pin::kAny, {}};
    if (rest.empty()) return r;
    r.pin = Pin::kExact;
    if (rest.starts_with(">=")) {
      r.pin = Pin::kAtLeast;
      rest.remove_prefix(2);
    } else if (rest.starts_with("==")) {
      rest.remove_prefix(2);
    } else if (rest.front() == '_' || rest.front() == '-' || rest.front() == '.') {
      rest.remove_prefix(1);
    }
    auto version = parse_version(rest);
    if (!version) return std::nullopt;
    r.version = std::move(*version);
    return r;
  }
  return std::nullopt;
}

// The numbers of `#define NAME <integer>` lines in a header, in the order of `names`, up to the
// first one missing.
std::vector<int> version_in(const fs::path& header, const std::vector<std::string_view>& names) {
  std::ifstream in(header);
  std::vector<std::optional<int>> values(names.size());
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string define, name;
    long value = 0;
    if (!(words >> define >> name >> value) || define != "#define") continue;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (name == names[i] && !values[i]) values[i] = static_cast<int>(value);
    }
  }
  std::vector<int> out;
  for (const auto& v : values) {
    if (!v) break;
    out.push_back(*v);
  }
  return out;
}

std::string version_text(const std::vector<int>& v) {
  return v.empty() ? "of unknown version" : fmt::format("{}", fmt::join(v, "."));
}

bool satisfies(const Request& r, const std::vector<int>& found) {
  if (r.pin == Pin::kAny) return true;
  if (found.empty()) return false;
  if (r.pin == Pin::kExact) {
    for (std::size_t i = 0; i < r.version.size(); ++i) {
      if (i >= found.size() || found[i] != r.version[i]) return false;
    }
    return true;
  }
  for (std::size_t i = 0; i < r.version.size(); ++i) {
    const int have = i < found.size() ? found[i] : 0;
    if (have != r.version[i]) return have > r.version[i];
  }
  return true;
}

std::string multiarch() {
  utsname u{};
  return fmt::format("{}-linux-gnu", ::uname(&u) == 0 ? u.machine : "x86_64");
}

bool same_dir(const fs::path& a, const fs::path& b) {
  return a.lexically_normal() == b.lexically_normal();
}

bool any_same(const fs::path& p, const std::vector<fs::path>& dirs) {
  return std::any_of(dirs.begin(), dirs.end(), [&](const fs::path& d) { return same_dir(p, d); });
}

// Folders the host compiler and nvcc search anyway (an -I for one of them would only reorder).
const std::vector<fs::path>& default_include_dirs() {
  static const std::vector<fs::path> dirs = {"/usr/local/include", "/usr/include/" + multiarch(),
                                             "/usr/include"};
  return dirs;
}

// Folders the linker and the loader search anyway.
const std::vector<fs::path>& default_lib_dirs() {
  static const std::vector<fs::path> dirs = {
      "/usr/lib/" + multiarch(), "/lib/" + multiarch(), "/usr/lib64", "/lib64", "/usr/lib", "/lib"};
  return dirs;
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// -l<name> for lib<name>.so in dir; -l:lib<name>.so.<N> where only versioned files are (a
// runtime package without its development symlink); nullopt when neither is there.
std::optional<std::string> link_name(const fs::path& dir, std::string_view name) {
  const std::string plain = fmt::format("lib{}.so", name);
  if (is_file(dir / plain)) return fmt::format("-l{}", name);
  std::error_code ec;
  std::vector<std::string> versioned;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (file.rfind(plain + ".", 0) == 0) versioned.push_back(file);
  }
  if (versioned.empty()) return std::nullopt;
  std::sort(versioned.begin(), versioned.end());
  return "-l:" + versioned.front();  // the shortest: the soname's file (libcudnn.so.9)
}

struct Search {
  const Library& lib;
  const fs::path& toolkit_include;
  const fs::path& toolkit_lib;
  std::vector<std::string> looked;  // where, for the message when it is missing

  std::vector<fs::path> roots() const {
    std::vector<fs::path> out;
    for (const char* var : lib.env) {
      if (const char* v = std::getenv(var); v != nullptr && *v != '\0') out.emplace_back(v);
    }
    out.insert(out.end(), lib.extra_roots.begin(), lib.extra_roots.end());
    return out;
  }

  std::optional<fs::path> include_dir() {
    std::vector<fs::path> dirs;
    for (const fs::path& root : roots()) {
      dirs.push_back(root / "include");
      dirs.push_back(root);
    }
    dirs.push_back(toolkit_include);
    if (!lib.env.empty()) {  // a library beside the toolkit, not part of it
      dirs.insert(dirs.end(), default_include_dirs().begin(), default_include_dirs().end());
    }
    for (const fs::path& d : dirs) {
      if (is_file(d / lib.header)) return d;
      looked.push_back(d.string());
    }
    return std::nullopt;
  }

  std::optional<fs::path> lib_dir(const fs::path& include) {
    // Beside the headers first (a library's own install), then the toolkit's and the system's.
    const fs::path root = include.parent_path();
    std::vector<fs::path> dirs = {root / "lib64", root / "lib", root / "lib" / multiarch(),
                                  toolkit_lib};
    if (!lib.env.empty()) {
      dirs.push_back("/usr/local/lib");
      dirs.insert(dirs.end(), default_lib_dirs().begin(), default_lib_dirs().end());
    }
    for (const fs::path& d : dirs) {
      if (link_name(d, lib.libs.front())) return d;
      looked.push_back(d.string());
    }
    return std::nullopt;
  }
};

std::string how_to_point(const Library& lib) {
  if (lib.env.empty()) {
    return "it comes with the CUDA toolkit: point fib at a toolkit that has it with $FIB_NVCC";
  }
  return fmt::format("set {} to the folder holding include/{}{}", lib.env.front(), lib.header,
                     lib.libs.empty() ? "" : fmt::format(" and lib/lib{}.so", lib.libs.front()));
}

void add_once(std::vector<std::string>& v, std::string flag) {
  if (std::find(v.begin(), v.end(), flag) == v.end()) v.push_back(std::move(flag));
}

// One dependency's flags into *out; false with *missing set when it cannot be satisfied here.
bool add_library(const Request& r, const fs::path& toolkit_include, const fs::path& toolkit_lib,
                 DependencyFlags* out, std::string* missing) {
  const Library& lib = *std::find_if(libraries().begin(), libraries().end(),
                                     [&](const Library& l) { return l.name == r.library; });
  Search search{lib, toolkit_include, toolkit_lib, {}};
  const auto include = search.include_dir();
  if (!include) {
    *missing =
        fmt::format("unsupported: dependency '{}' needs {} ({}), found in none of {} ({})", r.text,
                    lib.display, lib.header, fmt::join(search.looked, ", "), how_to_point(lib));
    return false;
  }
  const fs::path version_header = *include / lib.version_header;
  const std::vector<int> version = version_in(
      is_file(version_header) ? version_header : *include / lib.header, lib.version_macros);
  if (!satisfies(r, version)) {
    *missing = fmt::format(
        "unsupported: dependency '{}' asks for {} {}{}; the one found ({}) is {} ({})", r.text,
        lib.display, fmt::join(r.version, "."), r.pin == Pin::kAtLeast ? " or newer" : "",
        include->string(), version_text(version), how_to_point(lib));
    return false;
  }
  std::string where = include->string();
  if (!same_dir(*include, toolkit_include) && !any_same(*include, default_include_dirs())) {
    add_once(out->compile, "-I" + include->string());
    const fs::path util = include->parent_path() / "tools" / "util" / "include";  // CUTLASS's
    std::error_code ec;
    if (lib.name == "cutlass" && fs::is_directory(util, ec))
      add_once(out->compile, "-I" + util.string());
  }
  if (!lib.libs.empty()) {
    const auto dir = search.lib_dir(*include);
    if (!dir) {
      *missing = fmt::format(
          "unsupported: dependency '{}' needs the {} library (lib{}.so), found in none of {} ({})",
          r.text, lib.display, lib.libs.front(), fmt::join(search.looked, ", "), how_to_point(lib));
      return false;
    }
    if (!same_dir(*dir, toolkit_lib) && !any_same(*dir, default_lib_dirs())) {
      add_once(out->link, "-L" + dir->string());
      add_once(out->link, "-Wl,-rpath," + dir->string());
    }
    for (std::string_view name : lib.libs) {
      const auto flag = link_name(*dir, name);
      if (!flag) {
        *missing = fmt::format("unsupported: dependency '{}' needs lib{}.so beside lib{}.so in {}",
                               r.text, name, lib.libs.front(), dir->string());
        return false;
      }
      add_once(out->link, *flag);
    }
    where += ", " + dir->string();
  }
  add_once(out->found, fmt::format("{} {} ({})", lib.name, version_text(version), where));
  return true;
}

}  // namespace

bool names_cuda_library(std::string_view dependency) {
  return parse_request(dependency).has_value();
}

std::optional<DependencyFlags> cuda_library_flags(const std::vector<std::string>& dependencies,
                                                  const fs::path& toolkit_include,
                                                  const fs::path& toolkit_lib,
                                                  std::string* missing) {
  DependencyFlags out;
  for (const std::string& d : dependencies) {
    const auto request = parse_request(d);
    if (!request) continue;
    if (!add_library(*request, toolkit_include, toolkit_lib, &out, missing)) return std::nullopt;
  }
  return out;
}

}  // namespace fib::bench::detail

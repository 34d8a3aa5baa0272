// build_solution: the content-addressed build cache (key, lookup, lock, build, install).
#include <fcntl.h>
#include <fmt/format.h>
#include <pwd.h>
#include <sys/file.h>
#include <unistd.h>
#include <xxhash.h>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "build_sandbox.h"
#include "elf_symbols.h"
#include "fib/base/files.h"
#include "fib/base/json.h"
#include "fib/bench/builder/build.h"
#include "fib/bench/builder/process.h"
#include "fib/bench/builder/python_build.h"
#include "fib/version.h"

namespace fib::bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kMaxLogBytes = std::size_t{1} << 20;
constexpr int kCacheFormat = 1;
constexpr const char* kAbiHeader = "fib/solution.h";

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// xxh3-128 over length-prefixed fields, so field boundaries are unambiguous.
class Hasher {
 public:
  Hasher() : state_(XXH3_createState()) {
    if (state_ == nullptr) throw std::bad_alloc();
    XXH3_128bits_reset(state_);
  }
  ~Hasher() { XXH3_freeState(state_); }
  Hasher(const Hasher&) = delete;  // owns the xxhash state
  Hasher& operator=(const Hasher&) = delete;

  void u64(std::uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    XXH3_128bits_update(state_, b, sizeof b);
  }
  void field(std::string_view s) {
    u64(s.size());
    XXH3_128bits_update(state_, s.data(), s.size());
  }
  std::string hex() const {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(state_));
    std::string out;
    for (unsigned char byte : c.digest) out += fmt::format("{:02x}", byte);
    return out;
  }

 private:
  XXH3_state_t* state_;
};

std::string hash_of(std::string_view text) {
  Hasher h;
  h.field(text);
  return h.hex();
}

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

// Writes a new file (never follows or replaces an existing one). Throws std::runtime_error
// (fib::Error when a write fails).
void write_new_file(const fs::path& p, std::string_view content) {
  fs::create_directories(p.parent_path());
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot create {}: {}", p.string(), std::strerror(errno)));
  try {
    write_all(fd, content, p.string());
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

bool is_c_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && (i == 0 || c < '0' || c > '9')) return false;
  }
  return true;
}

// Problems with the sources that no compiler needs to see; nullopt when there are none.
std::optional<std::string> check_sources(const Solution& s, const Toolchain& tc) {
  if (s.sources.empty()) return "the solution has no sources";
  std::set<std::string, std::less<>> paths;
  std::string why;
  for (const auto& src : s.sources) {
    if (!is_safe_relative_path(src.path, &why)) {
      return fmt::format("unsafe source path '{}': {} (refused; nothing was written)", src.path,
                         why);
    }
    if (!paths.insert(src.path).second) return fmt::format("duplicate source path '{}'", src.path);
  }
  for (const auto& src : s.sources) {
    for (std::size_t slash = src.path.find('/'); slash != std::string::npos;
         slash = src.path.find('/', slash + 1)) {
      if (paths.count(src.path.substr(0, slash)) != 0) {
        return fmt::format("source path '{}' is both a file and the folder of '{}'",
                           src.path.substr(0, slash), src.path);
      }
    }
  }
  const std::string& entry = s.spec.entry_point;
  const std::string file = s.spec.entry_file(), symbol = s.spec.entry_symbol();
  if (entry.find("::") == std::string::npos || file.empty() || symbol.empty()) {
    return fmt::format("entry point '{}' is not of the form 'file::symbol'", entry);
  }
  if (s.source(file) == nullptr) {
    return fmt::format("entry point '{}': file '{}' is not among the sources", entry, file);
  }
  if (!is_c_identifier(symbol)) {
    return fmt::format(
        "entry point '{}': symbol '{}' is not a C identifier (FIB_EXPORT_SOLUTION exports an "
        "extern \"C\" name)",
        entry, symbol);
  }
  bool compiles = false;
  for (const auto& src : s.sources) compiles = compiles || tc.step_for(src.path) != nullptr;
  if (!compiles) {
    std::vector<std::string> exts;
    for (const auto& step : tc.steps)
      exts.insert(exts.end(), step.extensions.begin(), step.extensions.end());
    return fmt::format("no source to compile (language '{}' compiles {} files)", s.spec.language,
                       fmt::join(exts, ", "));
  }
  return std::nullopt;
}

// The first line of compiler output that says what went wrong.
std::string first_error(std::string_view output) {
  std::size_t start = 0;
  while (start < output.size()) {
    std::size_t end = output.find('\n', start);
    if (end == std::string_view::npos) end = output.size();
    const std::string_view line = output.substr(start, end - start);
    for (std::string_view pattern : {"error:", "undefined reference", "multiple definition"}) {
      if (line.find(pattern) != std::string_view::npos) {
        return std::string(line.substr(0, 400));
      }
    }
    start = end + 1;
  }
  return {};
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// An exclusive flock on a file, released when destroyed (flock locks belong to the open file
// description, so two threads of one process exclude each other too).
class FileLock {
 public:
  FileLock() = default;
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;  // owns a descriptor
  FileLock& operator=(const FileLock&) = delete;

  // Waits until `until`; false with *why on failure.
  bool acquire(const fs::path& path, Clock::time_point until, std::string* why) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      *why = fmt::format("cannot open the lock {}: {}", path.string(), std::strerror(errno));
      return false;
    }
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        *why = fmt::format("cannot lock {}: {}", path.string(), std::strerror(errno));
        return false;
      }
      if (Clock::now() >= until) {
        *why =
            fmt::format("timed out waiting for another build of this key (lock {})", path.string());
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

 private:
  int fd_ = -1;
};

std::vector<std::string> string_list(const Json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& v : j) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// Fills `r` from a complete cache entry (its flags from step `flags_of`); false when there is
// none (or it is unreadable).
bool read_entry(const fs::path& entry, const std::string& flags_of, BuildResult& r) {
  const auto text = read_file(entry / "meta.json");
  if (!text) return false;
  const Json meta = Json::parse(*text, nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) return false;
  const auto get_string = [&](const char* k) {
    const auto it = meta.find(k);
    return it != meta.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string status = get_string("status");
  if (status == "built") {
    std::error_code ec;
    if (!fs::is_regular_file(entry / "solution.so", ec)) return false;
    r.status = BuildStatus::kCached;
    r.shared_object = entry / "solution.so";
  } else if (status == "failed") {
    r.status = BuildStatus::kFailed;
  } else {
    return false;
  }
  r.from_cache = true;
  r.directory = entry;
  r.message = get_string("message");
  r.log = read_file(entry / "build.log").value_or("");
  r.toolchain = get_string("toolchain");
  const auto seconds = meta.find("seconds");
  r.build_seconds = seconds != meta.end() && seconds->is_number() ? seconds->get<double>() : 0.0;
  const auto flags = meta.find("flags");
  if (flags != meta.end() && flags->is_object()) {
    if (flags->contains(flags_of)) r.flags = string_list(flags->at(flags_of));
    if (flags->contains("link")) r.link_flags = string_list(flags->at("link"));
  }
  return true;
}

Json compiler_json(const Compiler& c) {
  Json j = Json::object();
  j["command"] = c.command;
  j["resolved"] = c.resolved.string();
  j["version"] = c.version;
  return j;
}

struct Outcome {
  bool ok = false;
  bool cacheable = true;  // false: an environmental failure (timeout, crash, I/O), not cached
  std::string message;
};

class Builder {
 public:
  Builder(const Solution& s, const Toolchain& tc, std::string_view abi, const fs::path& dir,
          Clock::time_point deadline, std::chrono::milliseconds timeout,
          const BuildSandbox& sandbox)
      : s_(s),
        tc_(tc),
        abi_(abi),
        dir_(dir),
        deadline_(deadline),
        timeout_(timeout),
        sandbox_(sandbox),
        toolchain_paths_(detail::toolchain_paths(tc)) {}

  const std::string& log() const { return log_; }

  Outcome run(const fs::path& entry, const std::string& key) {
    log_ += fmt::format("# fib build {}\n# toolchain {}\n# target {}\n", key, tc_.describe(),
                        tc_.target);
    log_ += fmt::format("# commands run in {}\n", (entry / "src").string());
    log_ += detail::build_sandbox_note(sandbox_);
    try {
      write_new_file(dir_ / "include" / kAbiHeader, abi_);
      for (const auto& src : s_.sources) write_new_file(dir_ / "src" / src.path, src.content);
    } catch (const std::exception& e) {
      return {false, false, e.what()};
    }
    std::vector<std::string> objects;
    for (const auto& src : s_.sources) {
      const CompileStep* step = tc_.step_for(src.path);
      if (step == nullptr) {
        if (!is_header(src.path)) {
          log_ += fmt::format("# {}: written, not compiled (not a source of language '{}')\n",
                              src.path, s_.spec.language);
        }
        continue;
      }
      const std::string object = "../obj/" + src.path + ".o";
      std::error_code ec;
      fs::create_directories((dir_ / "src" / object).parent_path(), ec);
      std::vector<std::string> argv = step->compiler.command;
      argv.insert(argv.end(), step->flags.begin(), step->flags.end());
      // A path starting with '-' would read as an option.
      const std::string arg = src.path.front() == '-' ? "./" + src.path : src.path;
      argv.insert(argv.end(), {"-c", arg, "-o", object});
      if (auto failed = command(argv, "compiling " + src.path)) return *failed;
      objects.push_back(object);
    }
    std::vector<std::string> argv = tc_.linker.command;
    argv.insert(argv.end(), {"-shared", "-o", "../solution.so"});
    argv.insert(argv.end(), objects.begin(), objects.end());
    argv.insert(argv.end(), tc_.link_flags.begin(), tc_.link_flags.end());
    if (auto failed = command(argv, "linking")) return *failed;
    return check_entry_symbol();
  }

 private:
  bool is_header(std::string_view path) const {
    for (const auto& ext : tc_.header_extensions) {
      if (path.size() > ext.size() && path.substr(path.size() - ext.size()) == ext) return true;
    }
    return false;
  }

  // Runs one command; nullopt on success, else the failed outcome.
  std::optional<Outcome> command(const std::vector<std::string>& argv, const std::string& what) {
    log_ += "$ " + detail::shell_join(argv) + "\n";
    const std::size_t room = log_.size() < kMaxLogBytes ? kMaxLogBytes - log_.size() : 0;
    const auto r =
        sandbox_.enabled()
            ? detail::run_process(detail::sandboxed_build_command(sandbox_, toolchain_paths_, dir_,
                                                                  dir_ / "src", argv),
                                  dir_ / "src", deadline_, room)
            : detail::run_process(argv, dir_ / "src", deadline_, room);
    log_ += r.output;
    if (!r.output.empty() && r.output.back() != '\n') log_ += '\n';
    if (r.dropped > 0) {
      log_ += fmt::format("# ... {} more bytes of output dropped (the log keeps {} bytes)\n",
                          r.dropped, kMaxLogBytes);
    }
    if (!r.started) {
      log_ += "# could not start: " + r.error + "\n";
      return Outcome{false, false, fmt::format("{} failed: could not start {}", what, r.error)};
    }
    if (r.timed_out) {
      const auto secs = std::chrono::duration<double>(timeout_).count();
      log_ += fmt::format("# killed: the build timed out after {:g} s\n", secs);
      return Outcome{
          false, false,
          fmt::format("{} timed out after {:g} s (the compiler was killed)", what, secs)};
    }
    if (r.signal != 0) {
      log_ += fmt::format("# killed by signal {} ({})\n", r.signal, ::strsignal(r.signal));
      return Outcome{false, false,
                     fmt::format("{}: the compiler was killed by signal {} ({})", what, r.signal,
                                 ::strsignal(r.signal))};
    }
    if (!r.error.empty()) {
      log_ += "# " + r.error + "\n";
      return Outcome{false, false, fmt::format("{} failed: {}", what, r.error)};
    }
    if (r.exit_code != 0) {
      log_ += fmt::format("# exit status {} ({:.2f} s)\n", r.exit_code, r.seconds);
      const std::string error = first_error(r.output);
      return Outcome{false, true,
                     error.empty() ? fmt::format("{} failed: exit status {}", what, r.exit_code)
                                   : fmt::format("{} failed: {}", what, error)};
    }
    log_ += fmt::format("# ok ({:.2f} s)\n", r.seconds);
    return std::nullopt;
  }

  Outcome check_entry_symbol() {
    const std::string name = s_.spec.entry_symbol();
    const std::string symbol = tc_.entry_prefix + name;
    const std::string& macro = tc_.export_macro;
    std::string why;
    const auto symbols = detail::read_elf_symbols(dir_ / "solution.so", &why);
    if (!symbols) {
      log_ += "# cannot read the shared object's symbols: " + why + "\n";
      return {false, false, "cannot read the shared object's symbols: " + why};
    }
    if (const detail::ElfSymbol* e = symbols->exported(symbol)) {
      if (!e->function) {
        const std::string message = fmt::format(
            "entry point '{}': symbol '{}' is exported but is not a function (export the entry "
            "with {}({}, ...))",
            s_.spec.entry_point, symbol, macro, name);
        log_ += "# " + message + "\n";
        return {false, true, message};
      }
      log_ += fmt::format("# entry symbol '{}' is exported\n", symbol);
      return {true, true, {}};
    }
    std::string message = fmt::format(
        "entry point '{}': symbol '{}' is not exported by the shared object (did you forget "
        "{}({}, ...)?)",
        s_.spec.entry_point, symbol, macro, name);
    if (symbols->defines(symbol)) {
      message += fmt::format(
          "; a symbol '{}' is defined but hidden: fib builds with -fvisibility=hidden and {} is "
          "what exports",
          symbol, macro);
    }
    log_ += "# " + message + "\n";
    return {false, true, message};
  }

  const Solution& s_;
  const Toolchain& tc_;
  std::string_view abi_;
  fs::path dir_;
  Clock::time_point deadline_;
  std::chrono::milliseconds timeout_;
  const BuildSandbox& sandbox_;
  std::vector<fs::path> toolchain_paths_;
  std::string log_;
};

std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  return fmt::format("{}-{}-{}", ::getpid(), counter.fetch_add(1),
                     Clock::now().time_since_epoch().count() % 1000000);
}

// meta.json of an entry: status, time, toolchain, flags and the inputs of the key (hashes of
// the texts, which are beside it), plus the solution that first needed it (not in the key).
Json entry_meta(const Solution& s, const Toolchain& tc, const std::string& abi,
                const BuildResult& r, const Outcome& outcome) {
  Json meta = Json::object();
  meta["format"] = kCacheFormat;
  meta["key"] = r.key;
  meta["status"] = outcome.ok ? "built" : "failed";
  meta["message"] = outcome.message;
  meta["seconds"] = r.build_seconds;
  meta["created"] = utc_now();
  meta["fib_version"] = std::string(kVersion);
  meta["toolchain"] = r.toolchain;
  Json inputs = Json::object();
  inputs["abi_header"] = {{"path", std::string("include/") + kAbiHeader},
                          {"bytes", abi.size()},
                          {"xxh3_128", hash_of(abi)}};
  inputs["language"] = s.spec.language;
  inputs["binding"] = s.spec.binding_or_default();
  inputs["entry_point"] = s.spec.entry_point;
  Json sources = Json::array();
  for (const auto& src : s.sources) {
    sources.push_back(
        {{"path", src.path}, {"bytes", src.content.size()}, {"xxh3_128", hash_of(src.content)}});
  }
  inputs["sources"] = std::move(sources);
  Json toolchain = Json::object();
  toolchain["id"] = tc.id;
  toolchain["target"] = tc.target;
  for (const auto& step : tc.steps) {
    toolchain["compilers"][step.name] = compiler_json(step.compiler);
  }
  toolchain["linker"] = compiler_json(tc.linker);
  inputs["toolchain"] = std::move(toolchain);
  meta["key_inputs"] = std::move(inputs);
  Json flags = Json::object();
  for (const auto& step : tc.steps) flags[step.name] = step.flags;
  flags["link"] = tc.link_flags;
  meta["flags"] = std::move(flags);
  meta["first_built_for"] = {
      {"solution", s.name}, {"author", s.author}, {"definition", s.definition}};
  return meta;
}

// Removes the build folders of `key` that a killed builder left in tmp/. Only called under the
// key's lock, which every builder of the key holds while its folder exists.
void remove_leftovers(const fs::path& tmp_root, const std::string& key) {
  std::vector<fs::path> leftovers;
  std::error_code ec;
  for (fs::directory_iterator it(tmp_root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > key.size() && name.compare(0, key.size(), key) == 0 &&
        name[key.size()] == '-') {
      leftovers.push_back(it->path());
    }
  }
  for (const auto& p : leftovers) fs::remove_all(p, ec);
}

}  // namespace

const char* to_string(BuildStatus s) {
  switch (s) {
    case BuildStatus::kBuilt:
      return "built";
    case BuildStatus::kCached:
      return "cached";
    case BuildStatus::kFailed:
      return "failed";
    case BuildStatus::kUnsupported:
      return "unsupported";
  }
  return "unknown";
}

fs::path default_cache_dir() {
  const auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
  };
  if (const std::string d = env("FIB_CACHE_DIR"); !d.empty()) return d;
  if (const std::string d = env("XDG_CACHE_HOME"); !d.empty() && d.front() == '/') {
    return fs::path(d) / "fib" / "build";
  }
  std::string home = env("HOME");
  if (home.empty()) {
    if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
      home = pw->pw_dir;
    }
  }
  if (home.empty()) return fs::temp_directory_path() / "fib-cache" / "build";
  return fs::path(home) / ".cache" / "fib" / "build";
}

std::string build_key(const Solution& s, const Toolchain& tc, std::string_view abi_header,
                      bool sandboxed) {
  Hasher h;
  h.field("fib-build-cache");
  h.u64(kCacheFormat);
  // What a build could see decides what it made (an #include or .incbin of a file outside the
  // sandbox), so a sandboxed build never answers from an unsandboxed one's entry.
  if (sandboxed) h.field("built in the sandbox");
  h.field(abi_header);
  h.field(tc.identity());  // id, target, compilers and every flag
  h.field(s.spec.language);
  h.field(s.spec.binding_or_default());
  h.field(s.spec.entry_point);
  h.u64(s.sources.size());
  for (const auto& src : s.sources) {
    h.field(src.path);
    h.field(src.content);
  }
  return h.hex();
}

BuildResult build_solution(const Solution& s, const BuildOptions& o) {
  if (detail::runs_in_python(s)) return detail::build_python_solution(s, o);
  const auto t0 = Clock::now();
  BuildResult r;
  const auto done = [&](BuildStatus status, std::string message) {
    r.status = status;
    if (!message.empty()) {
      r.message = std::move(message);
      if (r.log.empty()) r.log = r.message + "\n";
    }
    r.seconds = seconds_since(t0);
    return r;
  };
  std::string unsupported, error;
  const auto tc = select_toolchain(s, o, &unsupported, &error);
  if (!tc) {
    return unsupported.empty() ? done(BuildStatus::kFailed, error)
                               : done(BuildStatus::kUnsupported, unsupported);
  }
  r.toolchain = tc->describe();
  const CompileStep* entry_step = tc->step_for(s.spec.entry_file());
  if (entry_step == nullptr) entry_step = &tc->steps.front();
  r.flags = entry_step->flags;
  r.link_flags = tc->link_flags;
  if (auto problem = check_sources(s, *tc)) return done(BuildStatus::kFailed, *problem);
  if (o.abi_include_dir.empty()) {
    return done(BuildStatus::kFailed,
                "no ABI include folder given (BuildOptions::abi_include_dir)");
  }
  const fs::path abi_path = o.abi_include_dir / kAbiHeader;
  const auto abi = read_file(abi_path);
  if (!abi) return done(BuildStatus::kFailed, "cannot read the ABI header " + abi_path.string());

  r.sandboxed = o.sandbox.enabled();
  r.key = build_key(s, *tc, *abi, r.sandboxed);
  // Absolute, so the shared object's path stays valid in a worker with another working folder.
  const fs::path given = o.cache_dir.empty() ? default_cache_dir() : o.cache_dir;
  std::error_code abs_ec;
  fs::path cache = fs::absolute(given, abs_ec);
  if (abs_ec) cache = given;
  const fs::path entry = cache / r.key.substr(0, 2) / r.key;
  if (!o.force && read_entry(entry, entry_step->name, r)) return done(r.status, {});

  // Only one builder per key: the others wait here, then find the entry.
  FileLock lock;
  std::string why;
  if (!lock.acquire(cache / "locks" / (r.key + ".lock"),
                    Clock::now() + o.timeout + std::chrono::seconds(60), &why)) {
    return done(BuildStatus::kFailed, why);
  }
  if (!o.force && read_entry(entry, entry_step->name, r)) return done(r.status, {});

  const fs::path tmp_root = cache / "tmp";
  std::error_code ec;
  fs::create_directories(tmp_root, ec);
  remove_leftovers(tmp_root, r.key);
  const fs::path dir = tmp_root / (r.key + "-" + unique_suffix());
  if (ec || !fs::create_directory(dir, ec) || ec) {
    return done(BuildStatus::kFailed,
                fmt::format("cannot create a build folder in {}: {}", tmp_root.string(),
                            ec ? ec.message() : "it exists"));
  }
  const auto build_start = Clock::now();
  Builder builder(s, *tc, *abi, dir, build_start + o.timeout, o.timeout, o.sandbox);
  const Outcome outcome = builder.run(entry, r.key);
  r.build_seconds = seconds_since(build_start);
  r.log = detail::head_and_tail(builder.log());
  fs::remove_all(dir / "obj", ec);
  if (!outcome.ok && !outcome.cacheable) {
    fs::remove_all(dir, ec);
    return done(BuildStatus::kFailed, outcome.message);
  }

  const Json meta = entry_meta(s, *tc, *abi, r, outcome);
  try {
    write_new_file(dir / "build.log", r.log);
    write_new_file(dir / "meta.json", dump_json_pretty(meta));  // last: marks the entry complete
    fs::create_directories(entry.parent_path());
    if (fs::exists(entry)) {  // a forced rebuild or an unreadable entry: move the old one away
      const fs::path old = tmp_root / (r.key + "-old-" + unique_suffix());
      fs::rename(entry, old);
      fs::remove_all(old, ec);
    }
    fs::rename(dir, entry);
  } catch (const std::exception& e) {
    fs::remove_all(dir, ec);
    return done(BuildStatus::kFailed,
                fmt::format("cannot store the build in the cache: {}", e.what()));
  }
  r.directory = entry;
  if (!outcome.ok) return done(BuildStatus::kFailed, outcome.message);
  r.shared_object = entry / "solution.so";
  return done(BuildStatus::kBuilt, {});
}

}  // namespace fib::bench

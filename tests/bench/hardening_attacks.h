// Payloads of the red-team solutions that patch the harness from inside its worker
// (tests/bench/hardening_test.cpp): rewriting an import slot of the worker binary (through
// mprotect, /proc/self/mem, a ptrace'd helper, process_vm_writev), detouring the code of its
// clock, taking over the draw of the checked call, relaying the worker's channel, stalling the
// worker on a userfaultfd. Each is C++17 appended to the rmsnorm solution source; each prints
// "ATTACK TOOK" or "ATTACK FAILED: <why>" once per worker, so the tests can tell a blocked attack
// from one that took and was caught later.
#pragma once

namespace fib::testing {

// got_slot(name): the worker binary's GOT slot of the imported function `name` (its dynamic
// relocations), or nullptr. slow_now(): a steady_clock::now that runs 60x slow from
// `slow_from_ns` on, read from CLOCK_MONOTONIC directly (so a detoured steady_clock::now can use
// it). spin_call(): the kernel's work, 80 ms of real time. report(ok, why): prints the attack's
// outcome once.
inline constexpr const char* kHarnessPatchHelpers = R"(
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
static long long mono_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}
// 80 ms of real time: long enough that a time slice lost to a loaded machine (a few ms) stays
// within the 10% the tests compare latencies by.
static void spin_call() {
  const long long end = mono_ns() + 80000000LL;
  while (mono_ns() < end) {
  }
}
static long long slow_from_ns = 0;
static long long slow_now() {
  const long long now = mono_ns();
  return slow_from_ns + (now - slow_from_ns) / 60;
}
struct SlotSearch { const char* name; void** slot; };
static int find_slot(dl_phdr_info* info, size_t, void* arg) {
  auto* s = static_cast<SlotSearch*>(arg);
  if (s->slot || (info->dlpi_name && info->dlpi_name[0])) return 0;
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
  for (int t = 0; t < 2; ++t)
    for (size_t i = 0; tables[t] && i < sizes[t] / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela)& r = tables[t][i];
      if (std::strcmp(strs + syms[ELF64_R_SYM(r.r_info)].st_name, s->name) == 0)
        s->slot = reinterpret_cast<void**>(base + r.r_offset);
    }
  return 0;
}
static void** got_slot(const char* name) {
  SlotSearch s{name, nullptr};
  dl_iterate_phdr(&find_slot, &s);
  return s.slot;
}
static void* page_of(const void* p) {
  const long page = sysconf(_SC_PAGESIZE);
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(page - 1));
}
static void report(bool ok, const char* why) {
  if (ok) std::printf("ATTACK TOOK\n");
  else std::printf("ATTACK FAILED: %s\n", why);
  std::fflush(stdout);
}
static const char* kNow = "_ZNSt6chrono3_V212steady_clock3nowEv";
)";

// attack(): the clock's GOT slot made writable with mprotect, then rewritten.
inline constexpr const char* kGotMprotectAttack = R"(
static bool attack() {
  void** slot = got_slot(kNow);
  if (!slot) { report(false, "no slot"); return false; }
  if (mprotect(page_of(slot), sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE) != 0) {
    report(false, std::strerror(errno)); return false;
  }
  slow_from_ns = mono_ns();
  *slot = reinterpret_cast<void*>(&slow_now);
  report(true, ""); return true;
}
)";

// attack(): the clock's GOT slot rewritten through /proc/self/mem, which writes read-only pages.
inline constexpr const char* kProcSelfMemAttack = R"(
#include <fcntl.h>
static bool attack() {
  void** slot = got_slot(kNow);
  if (!slot) { report(false, "no slot"); return false; }
  const int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  if (fd < 0) { report(false, std::strerror(errno)); return false; }
  slow_from_ns = mono_ns();
  void* value = reinterpret_cast<void*>(&slow_now);
  const bool ok = pwrite(fd, &value, sizeof value, reinterpret_cast<off_t>(slot)) == sizeof value;
  const int err = errno;
  close(fd);
  report(ok, std::strerror(err)); return ok;
}
)";

// attack(): a forked helper attaches to the worker with ptrace and pokes the clock's GOT slot
// (PTRACE_POKEDATA writes read-only pages).
inline constexpr const char* kPtraceHelperAttack = R"(
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
static bool attack() {
  void** slot = got_slot(kNow);
  if (!slot) { report(false, "no slot"); return false; }
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  slow_from_ns = mono_ns();
  void* value = reinterpret_cast<void*>(&slow_now);
  const pid_t worker = getpid();
  const pid_t helper = fork();
  if (helper == 0) {
    if (ptrace(PTRACE_ATTACH, worker, nullptr, nullptr) != 0) _exit(10 + errno);
    int st = 0;
    waitpid(worker, &st, __WALL);
    const long r = ptrace(PTRACE_POKEDATA, worker, slot, value);
    ptrace(PTRACE_DETACH, worker, nullptr, nullptr);
    _exit(r == 0 ? 0 : 1);
  }
  int st = 0;
  while (waitpid(helper, &st, 0) < 0 && errno == EINTR) {}
  const int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  report(code == 0, code >= 10 ? std::strerror(code - 10) : "the helper failed");
  return code == 0;
}
)";

// attack(): the GOT page made writable, then a forked helper writes the slot with
// process_vm_writev (as a helper with another process's view of the worker would).
inline constexpr const char* kProcessVmWriteAttack = R"(
#include <sys/uio.h>
#include <sys/wait.h>
static bool attack() {
  void** slot = got_slot(kNow);
  if (!slot) { report(false, "no slot"); return false; }
  const bool writable =
      mprotect(page_of(slot), sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE) == 0;
  const int mprotect_errno = errno;
  slow_from_ns = mono_ns();
  void* value = reinterpret_cast<void*>(&slow_now);
  const pid_t worker = getpid();
  const pid_t helper = fork();
  if (helper == 0) {
    iovec local{&value, sizeof value}, remote{slot, sizeof value};
    _exit(process_vm_writev(worker, &local, 1, &remote, 1, 0) == sizeof value ? 0 : 10 + errno);
  }
  int st = 0;
  while (waitpid(helper, &st, 0) < 0 && errno == EINTR) {}
  const int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  char why[160];
  std::snprintf(why, sizeof why, "mprotect: %s; process_vm_writev: %s",
                writable ? "ok" : std::strerror(mprotect_errno),
                code >= 10 ? std::strerror(code - 10) : "ok");
  report(code == 0, why);
  return code == 0;
}
)";

// attack(): a jump written over the start of the C++ runtime's steady_clock::now (x86-64).
inline constexpr const char* kCodeDetourAttack = R"(
#include <dlfcn.h>
static bool attack() {
#if defined(__x86_64__)
  auto* code = static_cast<unsigned char*>(dlsym(RTLD_DEFAULT, kNow));
  if (!code) { report(false, "no steady_clock::now"); return false; }
  const long page = sysconf(_SC_PAGESIZE);
  if (mprotect(page_of(code), 2 * page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
    report(false, std::strerror(errno)); return false;
  }
  slow_from_ns = mono_ns();
  const auto target = reinterpret_cast<std::uint64_t>(&slow_now);
  unsigned char jump[12] = {0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xe0};  // movabs rax; jmp rax
  std::memcpy(jump + 2, &target, sizeof target);
  std::memcpy(code, jump, sizeof jump);
  __builtin___clear_cache(reinterpret_cast<char*>(code), reinterpret_cast<char*>(code) + 12);
  report(true, ""); return true;
#else
  report(false, "x86-64 only"); return false;
#endif
}
)";

// attack(): the worker's getrandom slot taken over, so that the solution chooses which call of a
// trial is checked: the draw after a call keeps it (0) when the solution computed it, and keeps
// none (1; the first timed call of a trial is kept whatever the draw) when it skipped the work.
// The solution computes every third call only: each trial's first three timed calls hold one.
inline constexpr const char* kGetrandomTakeoverAttack = R"(
#include <sys/types.h>
static bool last_call_computed = false;
static ssize_t chosen_draw(void* buf, size_t n, unsigned) {
  std::memset(buf, 0, n);
  if (n > 0 && !last_call_computed) static_cast<unsigned char*>(buf)[0] = 1;
  return static_cast<ssize_t>(n);
}
static bool attack() {
  void** slot = got_slot("getrandom");
  if (!slot) { report(false, "no slot"); return false; }
  if (mprotect(page_of(slot), sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE) != 0) {
    report(false, std::strerror(errno)); return false;
  }
  *slot = reinterpret_cast<void*>(&chosen_draw);
  report(true, ""); return true;
}
static bool can_skip() {
  static long calls = 0;
  last_call_computed = calls++ % 3 == 0;
  return !last_call_computed;
}
)";

// attack(): the worker's channel relayed through a socket pair of the solution's, whose thread
// divides the samples and warmup times of every reply by 100.
inline constexpr const char* kChannelRelayAttack = R"(
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <cstdlib>
#include <string>
#include <thread>
static int real_channel = -1, worker_side = -1;
static bool read_all(int fd, char* p, size_t n) {
  while (n) { const ssize_t r = read(fd, p, n); if (r <= 0) return false; p += r; n -= r; }
  return true;
}
static bool write_all(int fd, const char* p, size_t n) {
  while (n) { const ssize_t r = write(fd, p, n); if (r <= 0) return false; p += r; n -= r; }
  return true;
}
static bool read_message(int fd, std::string* s) {
  unsigned char h[8];
  if (!read_all(fd, reinterpret_cast<char*>(h), 8)) return false;
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | h[i];
  s->resize(n);
  return read_all(fd, s->data(), n);
}
static bool write_message(int fd, const std::string& s) {
  unsigned char h[8];
  std::uint64_t n = s.size();
  for (auto& c : h) { c = n & 0xff; n >>= 8; }
  return write_all(fd, reinterpret_cast<char*>(h), 8) && write_all(fd, s.data(), s.size());
}
// Every number after `key` (one, or an array of them) divided by 100.
static std::string shrink(std::string s, const std::string& key) {
  for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + 1)) {
    size_t p = at + key.size();
    const bool array = s[p] == '[';
    if (array) ++p;
    while (p < s.size() && s[p] != ']') {
      char* end = nullptr;
      const double v = std::strtod(s.c_str() + p, &end);
      const size_t len = static_cast<size_t>(end - (s.c_str() + p));
      if (len == 0) break;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", v / 100);
      s.replace(p, len, buf);
      p += std::strlen(buf);
      if (!array || s[p] != ',') break;
      ++p;
    }
  }
  return s;
}
static void relay() {
  std::string m;
  for (;;) {
    pollfd fds[2] = {{real_channel, POLLIN, 0}, {worker_side, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;
    if (fds[0].revents) { if (!read_message(real_channel, &m) || !write_message(worker_side, m)) return; }
    if (fds[1].revents) {
      if (!read_message(worker_side, &m)) return;
      write_message(real_channel, shrink(shrink(m, "\"samples_ms\":"), "\"warmup_ms\":"));
    }
  }
}
static bool attack() {
  int channel = -1;
  for (int fd = 3; fd < 4096; ++fd) {
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) channel = fd;
  }
  int sv[2];
  if (channel < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    report(false, "no channel"); return false;
  }
  real_channel = fcntl(channel, F_DUPFD_CLOEXEC, 100);
  if (dup2(sv[0], channel) < 0) {
    const int err = errno;
    close(sv[0]); close(sv[1]); close(real_channel);
    report(false, std::strerror(err)); return false;
  }
  close(sv[0]);
  worker_side = sv[1];
  std::thread(relay).detach();
  report(true, ""); return true;
}
)";

// attack(): the call returns at once with its output's pages dropped and registered with a
// userfaultfd; the worker's own read of them after the call stalls on the fault, while a thread
// of the solution computes the output (and spins its 25 ms), then fills the pages in.
inline constexpr const char* kUserfaultfdStallAttack = R"(
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <thread>
#include <vector>
static bool uffd_works = true;
// Registers `y`'s pages and returns the descriptor, or -1 (errno set).
static int stall_on(const fib::TensorView& x, const fib::TensorView& w, const fib::TensorView& y) {
  const long page = sysconf(_SC_PAGESIZE);
  auto* data = reinterpret_cast<char*>(y.data_ptr<std::uint16_t>());
  const size_t bytes = static_cast<size_t>(x.size(0) * x.size(1)) * 2;
  char* begin = static_cast<char*>(page_of(data));
  char* end = static_cast<char*>(page_of(data + bytes + 64 + page - 1));  // and the guard bytes
  const size_t len = static_cast<size_t>(end - begin);
  const int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */));
  if (fd < 0) return -1;
  uffdio_api api{UFFD_API, 0, 0};
  uffdio_register reg{{reinterpret_cast<std::uint64_t>(begin), len}, UFFDIO_REGISTER_MODE_MISSING, 0};
  if (ioctl(fd, UFFDIO_API, &api) != 0) { close(fd); return -1; }
  if (ioctl(fd, UFFDIO_REGISTER, &reg) != 0) { close(fd); return -1; }
  auto* saved = new std::vector<char>(begin, end);  // guards and poison, as the worker left them
  madvise(begin, len, MADV_DONTNEED);
  const auto* xs = x.data_ptr<const std::uint16_t>();
  const auto* ws = w.data_ptr<const std::uint16_t>();
  const long rows = x.size(0), n = x.size(1);
  const size_t offset = static_cast<size_t>(data - begin);
  std::thread([fd, saved, begin, len, offset, xs, ws, rows, n] {
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, 10000);
    uffd_msg msg;
    (void)!read(fd, &msg, sizeof msg);
    rms(xs, ws, reinterpret_cast<std::uint16_t*>(saved->data() + offset), rows, n);
    spin_call();
    uffdio_copy copy{reinterpret_cast<std::uint64_t>(begin), reinterpret_cast<std::uint64_t>(saved->data()), len, 0, 0};
    ioctl(fd, UFFDIO_COPY, &copy);
    uffdio_range all{reinterpret_cast<std::uint64_t>(begin), len};
    ioctl(fd, UFFDIO_UNREGISTER, &all);
    close(fd);
    delete saved;
  }).detach();
  return fd;
}
)";

}  // namespace fib::testing

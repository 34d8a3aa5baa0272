// The worker's own lock-down (fib/bench/worker/hardening.h): mseal, Landlock, seccomp, in that
// order (sealing needs no privileges; Landlock and seccomp need no_new_privs, which the filter's
// load also sets).
#include "fib/bench/worker/hardening.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <link.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#ifdef FIB_HAVE_SECCOMP
#include <seccomp.h>
#endif

namespace fib::bench {

namespace {

// ---- mseal ---------------------------------------------------------------------------------

constexpr long kMsealSyscall = 462;  // Linux 6.10+, the same number on every architecture

struct Range {
  std::uintptr_t begin, end;
};

std::uintptr_t page_down(std::uintptr_t a, std::uintptr_t page) { return a & ~(page - 1); }
std::uintptr_t page_up(std::uintptr_t a, std::uintptr_t page) {
  return page_down(a + page - 1, page);
}

// The read-only and executable segments and the RELRO tables (GOT) of every object loaded now:
// the worker binary, the C and C++ runtimes, the loader. Writable data stays as it is.
int collect_sealable(dl_phdr_info* info, std::size_t, void* out) {
  auto* ranges = static_cast<std::vector<Range>*>(out);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  // The vDSO is the kernel's to seal (CONFIG_MSEAL_SYSTEM_MAPPINGS).
  if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "linux-vdso") != nullptr) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const std::uintptr_t at = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W) == 0 && ph.p_memsz > 0) {
      ranges->push_back({page_down(at, page), page_up(at + ph.p_memsz, page)});
    } else if (ph.p_type == PT_GNU_RELRO) {
      // The loader makes read-only only the whole pages of RELRO (glibc's _dl_protect_relro).
      const Range r{page_down(at, page), page_down(at + ph.p_memsz, page)};
      if (r.end > r.begin) ranges->push_back(r);
    }
  }
  return 0;
}

Json seal_loaded_objects() {
  std::vector<Range> ranges;
  ::dl_iterate_phdr(&collect_sealable, &ranges);
  std::size_t sealed = 0, bytes = 0;
  std::string first_error;
  for (const Range& r : ranges) {
    if (::syscall(kMsealSyscall, r.begin, r.end - r.begin, 0) == 0) {
      ++sealed;
      bytes += r.end - r.begin;
      continue;
    }
    if (errno == ENOSYS)
      return Json{{"on", false}, {"why", "the kernel has no mseal (Linux < 6.10)"}};
    if (first_error.empty()) first_error = std::strerror(errno);
  }
  Json j{{"on", sealed > 0},
         {"covers",
          "code, read-only data and RELRO (GOT) of the worker and the libraries it "
          "loaded before any solution"},
         {"ranges", sealed},
         {"bytes", bytes}};
  if (sealed < ranges.size())
    j["unsealed_ranges"] = Json{{"count", ranges.size() - sealed}, {"error", first_error}};
  if (sealed == 0) j["why"] = "mseal failed: " + first_error;
  return j;
}

// ---- Landlock ------------------------------------------------------------------------------

// The kernel's structures and flags (linux/landlock.h), spelled out so that fib builds against
// headers older than the kernel it runs on.
struct RulesetAttr {
  std::uint64_t handled_access_fs = 0;
  std::uint64_t handled_access_net = 0;
  std::uint64_t scoped = 0;
};
struct __attribute__((packed)) PathBeneathAttr {
  std::uint64_t allowed_access = 0;
  std::int32_t parent_fd = -1;
};
constexpr std::uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;
constexpr std::uint64_t kWriteFile = 1ull << 1;
constexpr std::uint64_t kRemoveDir = 1ull << 4, kRemoveFile = 1ull << 5;
constexpr std::uint64_t kMakeChar = 1ull << 6, kMakeDir = 1ull << 7, kMakeReg = 1ull << 8,
                        kMakeSock = 1ull << 9, kMakeFifo = 1ull << 10, kMakeBlock = 1ull << 11,
                        kMakeSym = 1ull << 12;
constexpr std::uint64_t kRefer = 1ull << 13;     // ABI 2
constexpr std::uint64_t kTruncate = 1ull << 14;  // ABI 3
constexpr std::uint64_t kIoctlDev = 1ull << 15;  // ABI 5

// Everything that changes the file system, as far as the kernel's ABI knows it; reads and
// execution stay as the sandbox's mounts allow them.
std::uint64_t handled_writes(int abi) {
  std::uint64_t a = kWriteFile | kRemoveDir | kRemoveFile | kMakeChar | kMakeDir | kMakeReg |
                    kMakeSock | kMakeFifo | kMakeBlock | kMakeSym;
  if (abi >= 2) a |= kRefer;
  if (abi >= 3) a |= kTruncate;
  if (abi >= 5) a |= kIoctlDev;  // device ioctls (a GPU's) only on writable device nodes
  return a;
}

int landlock_abi() {
  const long v = ::syscall(__NR_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return v < 0 ? -errno : static_cast<int>(v);
}

// Lets writes happen beneath `path` (a folder) or to it (a file: only the file rights apply).
bool allow_writes(int ruleset, const std::string& path, std::uint64_t handled) {
  const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  ::fstat(fd, &st);
  PathBeneathAttr rule;
  rule.allowed_access =
      S_ISDIR(st.st_mode) ? handled : handled & (kWriteFile | kTruncate | kIoctlDev);
  rule.parent_fd = fd;
  const long r = ::syscall(__NR_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0);
  ::close(fd);
  return r == 0;
}

Json restrict_writes(const std::vector<std::string>& writable) {
  const int abi = landlock_abi();
  if (abi < 0) {
    return Json{
        {"on", false},
        {"why", -abi == ENOSYS ? "the kernel has no Landlock (Linux < 5.13)"
                               : fmt::format("Landlock is disabled ({})", std::strerror(-abi))}};
  }
  RulesetAttr attr;
  attr.handled_access_fs = handled_writes(abi);
  const long ruleset = ::syscall(__NR_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0) {
    return Json{{"on", false},
                {"abi", abi},
                {"why", fmt::format("cannot make a ruleset: {}", std::strerror(errno))}};
  }
  const int fd = static_cast<int>(ruleset);
  Json allowed = Json::array();
  for (const std::string& p : writable) {
    if (allow_writes(fd, p, attr.handled_access_fs)) allowed.push_back(p);
  }
  const bool ok = ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
                  ::syscall(__NR_landlock_restrict_self, fd, 0) == 0;
  const std::string error = ok ? "" : std::strerror(errno);
  ::close(fd);
  if (!ok)
    return Json{{"on", false}, {"abi", abi}, {"why", "landlock_restrict_self failed: " + error}};
  return Json{{"on", true}, {"abi", abi}, {"writable", allowed}};
}

// ---- seccomp -------------------------------------------------------------------------------

// Denied with EPERM rather than killing the process: honest libraries probe some of these
// (perf_event_open by profilers, io_uring by runtimes that fall back to threads, keyctl by
// Kerberos-aware code) and take the refusal as "not available here".
//  - ptrace, process_vm_readv/writev: reading or writing the worker's memory from a helper
//    process (a forked child attaching to its parent) or from itself, around page protections;
//  - userfaultfd: stalling the worker's own reads of an output while the work happens outside
//    the timed calls (and ioctl USERFAULTFD_IOC_NEW on /dev/userfaultfd, below);
//  - perf_event_open, bpf: kernel-side instrumentation, and ways into the kernel;
//  - io_uring_*: syscalls made by the kernel on the process's behalf, which this filter would not
//    see;
//  - keyctl, add_key, request_key: the kernel keyring, shared beyond the sandbox;
//  - mount and the new mount API, umount2, pivot_root, unshare, setns: the sandbox's namespaces
//    stay as bubblewrap made them;
//  - kexec, modules: root-only already; no reason to reach them.
constexpr const char* kDenied[] = {"ptrace",
                                   "process_vm_readv",
                                   "process_vm_writev",
                                   "userfaultfd",
                                   "perf_event_open",
                                   "bpf",
                                   "io_uring_setup",
                                   "io_uring_enter",
                                   "io_uring_register",
                                   "keyctl",
                                   "add_key",
                                   "request_key",
                                   "mount",
                                   "umount2",
                                   "pivot_root",
                                   "unshare",
                                   "setns",
                                   "fsopen",
                                   "fsmount",
                                   "fspick",
                                   "move_mount",
                                   "open_tree",
                                   "mount_setattr",
                                   "kexec_load",
                                   "kexec_file_load",
                                   "init_module",
                                   "finit_module",
                                   "delete_module",
                                   "process_madvise"};

#ifdef FIB_HAVE_SECCOMP

std::string& refused_rule() {
  static std::string name;
  return name;
}

bool add_rule(scmp_filter_ctx ctx, std::uint32_t action, const char* name,
              std::initializer_list<scmp_arg_cmp> args) {
  const int nr = ::seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) return true;  // not on this architecture
  const bool ok = ::seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(args.size()),
                                           args.size() ? std::data(args) : nullptr) == 0;
  if (!ok) refused_rule() = name;
  return ok;
}

// personality(0xffffffff) only reads the persona (glibc and Python ask); any change (turning
// off address randomization for the next exec, READ_IMPLIES_EXEC) is refused.
// clone with a namespace flag is refused; clone3, whose flags sit in memory a filter cannot
// read, answers ENOSYS so that the C library falls back to clone.
bool add_process_rules(scmp_filter_ctx ctx) {
  const std::uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  bool ok = add_rule(ctx, eperm, "personality", {SCMP_A0(SCMP_CMP_NE, 0xffffffffu)});
  for (const std::uint64_t flag : {CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                                   CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP}) {
    ok = ok && add_rule(ctx, eperm, "clone", {SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)});
  }
  ok = ok && add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", {});
  // USERFAULTFD_IOC_NEW (_IO(0xAA, 0x00)): /dev/userfaultfd's way to the same file.
  ok = ok && add_rule(ctx, eperm, "ioctl", {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, 0xAA00u)});
  return ok;
}

// The channel keeps its descriptor: nothing may dup2/dup3 over it (a relay that puts a socket
// pair of its own in its place) or close it (so that a later socket takes its number).
bool add_channel_rules(scmp_filter_ctx ctx, int channel) {
  if (channel < 0) return true;
  const auto fd = static_cast<std::uint64_t>(channel);
  const std::uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  return add_rule(ctx, eperm, "dup2", {SCMP_A1(SCMP_CMP_EQ, fd)}) &&
         add_rule(ctx, eperm, "dup3", {SCMP_A1(SCMP_CMP_EQ, fd)}) &&
         add_rule(ctx, eperm, "close", {SCMP_A0(SCMP_CMP_EQ, fd)}) &&
         add_rule(ctx, eperm, "close_range", {SCMP_A0(SCMP_CMP_LE, fd), SCMP_A1(SCMP_CMP_GE, fd)});
}

// [begin, end) as aligned power-of-two blocks, each one masked comparison (a filter compares an
// argument once per rule).
std::vector<Range> aligned_blocks(Range r) {
  std::vector<Range> blocks;
  while (r.begin < r.end) {
    std::uintptr_t size = r.begin == 0 ? (std::uintptr_t{1} << 62) : (r.begin & -r.begin);
    while (size > r.end - r.begin) size >>= 1;
    blocks.push_back({r.begin, r.begin + size});
    r.begin += size;
  }
  return blocks;
}

// The worker binary's image: where mprotect, mmap(MAP_FIXED), mremap and munmap may not start
// (where mseal is missing, this is what keeps its GOT read-only; a call that starts below the
// image and runs into it is not seen, as a filter cannot add two arguments).
bool add_image_rules(scmp_filter_ctx ctx, Range image) {
  const std::uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  bool ok = true;
  for (const Range& b : aligned_blocks(image)) {
    const scmp_arg_cmp in_block = SCMP_A0(SCMP_CMP_MASKED_EQ, ~(b.end - b.begin - 1), b.begin);
    for (const char* call : {"mprotect", "pkey_mprotect", "mremap", "munmap"}) {
      ok = ok && add_rule(ctx, eperm, call, {in_block});
    }
    ok = ok && add_rule(ctx, eperm, "mmap",
                        {in_block, SCMP_A3(SCMP_CMP_MASKED_EQ, MAP_FIXED, MAP_FIXED)});
  }
  return ok;
}

int find_main_image(dl_phdr_info* info, std::size_t, void* out) {
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') return 0;
  auto* r = static_cast<Range*>(out);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const std::uintptr_t at = info->dlpi_addr + ph.p_vaddr;
    if (r->begin == 0 || at < r->begin) r->begin = page_down(at, page);
    r->end = std::max(r->end, page_up(at + ph.p_memsz, page));
  }
  return 1;  // the main program comes first
}

Json install_filter(int channel) {
  scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Json{{"on", false}, {"why", "seccomp_init failed"}};
  Range image{0, 0};
  ::dl_iterate_phdr(&find_main_image, &image);
  bool ok = true;
  for (const char* name : kDenied) ok = ok && add_rule(ctx, SCMP_ACT_ERRNO(EPERM), name, {});
  ok = ok && add_process_rules(ctx) && add_channel_rules(ctx, channel) &&
       add_image_rules(ctx, image);
  const int loaded = ok ? ::seccomp_load(ctx) : -1;
  ::seccomp_release(ctx);
  if (!ok)
    return Json{{"on", false}, {"why", "libseccomp refused a rule (" + refused_rule() + ")"}};
  if (loaded != 0)
    return Json{{"on", false},
                {"why", fmt::format("seccomp_load failed: {}", std::strerror(-loaded))}};
  Json denied = Json::array();
  for (const std::string& d : denied_syscalls()) denied.push_back(d);
  return Json{
      {"on", true},
      {"denied", denied},
      {"restricted",
       Json::array({"personality (changes)", "clone (namespace flags)", "clone3 (ENOSYS)",
                    "ioctl USERFAULTFD_IOC_NEW", "dup2/dup3/close/close_range of the channel",
                    "mprotect/pkey_mprotect/mremap/munmap/mmap MAP_FIXED in the worker binary"})},
      {"action", "EPERM"}};
}

#else
Json install_filter(int) {
  return Json{{"on", false}, {"why", "this fib was built without libseccomp (libseccomp-dev)"}};
}
#endif

}  // namespace

std::vector<std::string> denied_syscalls() { return {std::begin(kDenied), std::end(kDenied)}; }

Json install_worker_hardening(const WorkerHardening& h) {
  const Json off = Json{{"on", false}, {"why", "left off (a test build's unhardened worker)"}};
  Json record;
  record["mseal"] = h.mseal ? seal_loaded_objects() : off;
  record["landlock"] = h.landlock ? restrict_writes(h.writable) : off;
  record["seccomp"] = h.seccomp ? install_filter(h.channel_fd) : off;
  return record;
}

}  // namespace fib::bench

#include "bench/run/environment.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <random>

#include "fib/trace/diagnostics.h"

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

std::string iso_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}+00:00", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us % 1000000);
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
      fs::permissions(p, fs::perms::owner_all, ec);
      root_ = p;
      return;
    }
  }
  throw Error(base.string(), "cannot create a scratch folder for the run");
}

Scratch::~Scratch() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

}  // namespace fib::bench::detail

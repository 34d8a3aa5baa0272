#include "run_fib.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/temp_dir.h"

namespace fib::testing {

namespace {
std::string quote(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('\'');
  for (char c : s) {
    if (c == '\'') {
      out.append("'\\''");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}
std::string slurp(const std::filesystem::path& p) { return TempDir::read_file(p); }
}  // namespace

CommandResult run_fib(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  TempDir tmp;
  std::string cmd = "env -u FIB_SIGNING_KEY -u FIB_TRUSTED_KEYS";
  auto add = [&cmd](const std::string& prefix, const std::string& word) {
    cmd.append(prefix);
    cmd.append(quote(word));
  };
  // fib's home (its signing key) in the temporary folder unless the test names one, so tests
  // never make or use the keys of the user running them.
  const bool has_home = std::any_of(
      env.begin(), env.end(), [](const std::string& e) { return e.rfind("FIB_HOME=", 0) == 0; });
  if (!has_home) add(" ", "FIB_HOME=" + (tmp.path() / "fib-home").string());
  for (const auto& e : env) add(" ", e);
  add(" ", FIB_EXE);
  for (const auto& a : args) add(" ", a);
  add(" >", (tmp.path() / "out").string());
  add(" 2>", (tmp.path() / "err").string());
  cmd.append(" </dev/null");
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(tmp.path() / "out");
  r.err = slurp(tmp.path() / "err");
  return r;
}

}  // namespace fib::testing

// .pt dumps are pickles: loading one runs whatever it says. fib never unpickles in its own
// process; a Python child loads it with torch.load(weights_only=True) (only tensors and plain
// containers) inside bubblewrap, which shows it /usr read-only, the .pt file and an empty output
// folder, with every namespace unshared (no network), and writes the tensors back as safetensors.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "call_dump.h"
#include "fib/bench/builder/bwrap.h"

namespace fib::import {
namespace {

namespace fs = std::filesystem;

constexpr const char* kScript = R"py(
import json, struct, sys, torch
names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
         torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
         torch.uint8: "U8", torch.bool: "BOOL"}

def convert(folder):
    try:
        d = torch.load(f"/in/{folder}/inputs.pt", map_location="cpu", weights_only=True)
    except Exception as e:
        return f"not a weights-only torch.save file: {e}"
    if not isinstance(d, dict):
        return f"expected a dict of tensors, found {type(d).__name__}"
    header, blobs, offset = {}, [], 0
    for key, t in d.items():
        if not isinstance(t, torch.Tensor):
            continue
        if t.dtype not in names:
            return f"{key}: dtype {t.dtype} has no safetensors name here"
        flat = t.detach().contiguous().reshape(-1)
        data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        header[key] = {"dtype": names[t.dtype], "shape": list(t.shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(f"/out/{folder}.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))

for folder in sys.argv[1:]:
    error = convert(folder)
    if error:
        with open(f"/out/{folder}.error", "w") as f:
            f.write(error + "\n")
)py";

// fib's common sandbox (fib/bench/builder/bwrap.h: every namespace, private /proc, /dev and
// /tmp, its own session, dies with fib), seeing /usr read-only, the dump read-only at /in and an
// empty folder at /out.
std::vector<std::string> bwrap_arguments(const fs::path& dump_dir, const fs::path& out_dir,
                                         const std::string& python, const std::string& bwrap) {
  std::vector<std::string> a = bench::bwrap_base_arguments(bwrap, 65534, "fib-import");
  a.insert(a.end(), {"--ro-bind",
                     "/usr",
                     "/usr",
                     "--ro-bind-try",
                     "/etc/alternatives",
                     "/etc/alternatives",
                     "--ro-bind-try",
                     "/etc/ld.so.cache",
                     "/etc/ld.so.cache",
                     "--ro-bind",
                     dump_dir.string(),
                     "/in",
                     "--bind",
                     out_dir.string(),
                     "/out",
                     "--clearenv",
                     "--setenv",
                     "HOME",
                     "/tmp",
                     python,
                     "-I",
                     "-c",
                     kScript});
  return a;
}

// Runs argv with stdout and stderr into `log`; returns the exit status (-1: could not start).
int run_child(const std::vector<std::string>& argv, const fs::path& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string last_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace

void pt_to_safetensors(const fs::path& dump_dir, const std::vector<std::string>& folders,
                       const fs::path& out, const std::string& python, const std::string& bwrap) {
  if (!python.starts_with("/usr/"))
    throw Error(dump_dir.string(),
                fmt::format("the Python that reads .pt dumps must live under /usr (the sandbox "
                            "shows only /usr), not '{}'",
                            python));
  std::vector<std::string> argv = bwrap_arguments(fs::absolute(dump_dir), out, python, bwrap);
  argv.insert(argv.end(), folders.begin(), folders.end());
  const fs::path log = out / ".log";
  const int rc = run_child(argv, log);
  const std::string why = last_line(log);
  // Only regular files come out: a link the child left would be followed by fib.
  for (const fs::directory_entry& e : fs::directory_iterator(out))
    if (!fs::is_regular_file(e.symlink_status())) fs::remove_all(e.path());
  if (rc == 127 || rc == -1)
    throw Error(dump_dir.string(), fmt::format("cannot run {} (bubblewrap)", bwrap),
                "install bubblewrap, or dump with FLASHINFER_DUMP_SAFETENSORS=1");
  if (rc != 0)
    throw Error(dump_dir.string(),
                why.empty() ? fmt::format("the .pt reader exited with {}", rc) : why);
}

}  // namespace fib::import

#include "fib/dataset/keys.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "fib/base/files.h"
#include "fib/base/json.h"
#include "fib/dataset/files.h"

namespace fib {

namespace fs = std::filesystem;

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

fs::path home_folder() {
  if (auto h = env("HOME")) return *h;
  if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_dir != nullptr) {
    return pw->pw_dir;
  }
  throw Error("fib home", "cannot tell where the home folder is ($HOME is unset)",
              "set FIB_HOME to the folder fib keeps its signing key in");
}

// A key anyone but its owner could read is a key a solution running as another user (or any
// local user) could sign with.
void check_private(const fs::path& path, const struct stat& st) {
  if (st.st_uid != ::geteuid()) {
    throw Error(path.string(), "the signing key belongs to another user",
                "each user signs with their own key; point FIB_SIGNING_KEY at yours");
  }
  if ((st.st_mode & 077) != 0) {
    throw Error(path.string(),
                fmt::format("the signing key is readable or writable by others (mode {:04o})",
                            st.st_mode & 07777),
                fmt::format("chmod 600 {}", path.string()));
  }
}

void make_private_folder(const fs::path& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  make_private_folder(dir.parent_path());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error(dir.string(), fmt::format("cannot create folder: {}", std::strerror(errno)));
  }
}

// Writes a new key beside `path` and links it into place, which fails when another fib made
// one first: then that one is used, and both sign with the same key.
bool create_key_file(const fs::path& path, const SigningKey& key) {
  make_private_folder(path.parent_path());
  const fs::path tmp =
      path.parent_path() / fmt::format(".{}.tmp.{}", path.filename().string(), ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw Error(tmp.string(), fmt::format("cannot create: {}", std::strerror(errno)));
  try {
    if (::fchmod(fd, 0600) != 0) {
      throw Error(tmp.string(), fmt::format("cannot set mode 0600: {}", std::strerror(errno)));
    }
    write_all(fd, key.to_pem(), tmp.string());
    if (::fsync(fd) != 0) {
      throw Error(tmp.string(), fmt::format("fsync failed: {}", std::strerror(errno)));
    }
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int e = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && e != EEXIST) {
    throw Error(path.string(), fmt::format("cannot create the signing key: {}", std::strerror(e)));
  }
  return linked == 0;
}

}  // namespace

fs::path fib_home() {
  if (auto h = env("FIB_HOME")) return *h;
  if (auto x = env("XDG_CONFIG_HOME")) return fs::path(*x) / "fib";
  return home_folder() / ".config" / "fib";
}

fs::path default_signing_key_path() {
  if (auto p = env("FIB_SIGNING_KEY")) return *p;
  return fib_home() / "signing-key.pem";
}

fs::path default_trusted_keys_path() {
  if (auto p = env("FIB_TRUSTED_KEYS")) return *p;
  return fib_home() / "trusted-keys";
}

std::optional<SigningKey> load_signing_key(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw Error(path.string(),
                fmt::format("cannot open the signing key: {}", std::strerror(errno)));
  }
  struct stat st {};
  const int stat_rc = ::fstat(fd, &st);
  ::close(fd);
  if (stat_rc != 0) {
    throw Error(path.string(),
                fmt::format("cannot stat the signing key: {}", std::strerror(errno)));
  }
  check_private(path, st);
  Diagnostics diag;
  auto pem = read_text_file(path.string(), diag, 1 << 16);
  if (!pem) throw Error(std::move(diag));
  return SigningKey::from_pem(*pem, path.string());
}

SigningKey load_or_create_signing_key(const fs::path& path, bool* created) {
  if (created) *created = false;
  if (auto key = load_signing_key(path)) return *key;
  const SigningKey fresh = SigningKey::generate();
  if (create_key_file(path, fresh)) {
    if (created) *created = true;
    return fresh;
  }
  if (auto key = load_signing_key(path)) return *key;
  throw Error(path.string(), "the signing key vanished while it was being created");
}

void read_trusted_keys(const fs::path& path, TrustedKeys& into, Diagnostics& diag) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  auto text = read_text_file(path.string(), diag, 16 << 20);
  if (!text) return;
  for (const auto& line : split_jsonl(*text)) {
    const auto start = line.text.find_first_not_of(" \t");
    if (start == std::string_view::npos || line.text[start] == '#') continue;
    if (auto key = PublicKey::parse_line(line.text)) {
      into.key_ids.insert(key->key_id());
    } else {
      diag.error(fmt::format("{}:{}", path.string(), line.number), {},
                 "not a public key line (expected \"ed25519 <base64 public key> [comment]\")",
                 "`fib key show` prints the line to add for a key");
    }
  }
}

bool add_trusted_key(const fs::path& path, const PublicKey& key, std::string_view comment) {
  TrustedKeys present;
  Diagnostics ignored;
  read_trusted_keys(path, present, ignored);
  if (present.contains(key.key_id())) return false;
  const std::string line = key.line(comment);
  append_jsonl(path, std::span<const std::string>(&line, 1));
  return true;
}

TrustedKeys default_trusted_keys(Diagnostics& diag) {
  TrustedKeys keys;
  try {
    if (auto own = load_signing_key(default_signing_key_path())) {
      keys.key_ids.insert(own->public_key().key_id());
    }
  } catch (const Error& e) {
    for (const auto& d : e.diagnostics()) diag.add(d);
  }
  read_trusted_keys(default_trusted_keys_path(), keys, diag);
  return keys;
}

}  // namespace fib

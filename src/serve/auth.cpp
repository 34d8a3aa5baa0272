#include "serve/auth.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "fib/base/diagnostics.h"
#include "fib/base/files.h"

namespace fib::serve {

namespace fs = std::filesystem;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The value of one cookie in a Cookie header ("a=1; fib_token=...").
std::string_view cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const std::size_t end = std::min(header.find(';'), header.size());
    std::string_view pair = trim(header.substr(0, end));
    const std::size_t eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == name) return pair.substr(eq + 1);
    header.remove_prefix(std::min(end + 1, header.size()));
  }
  return {};
}

// Writes the token with mode 0600 from the start, then renames it into place, so it is never
// readable by others and a second server starting at once finds a whole file or none.
void write_private_file(const fs::path& path, const std::string& content) {
  try {
    write_file_atomic(path, content, {.mode = 0600});
  } catch (const Error& e) {
    throw Error(path.string(), "cannot write the token file", e.what());
  }
}

}  // namespace

std::string make_token() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    throw Error("token", "the system's random source failed", "check /dev/urandom");
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

std::string read_token_file(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw Error(path.string(), "cannot read the token file", std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    throw Error(
        path.string(),
        fmt::format("the token file's mode {:o} lets other users read it", st.st_mode & 0777),
        fmt::format("chmod 600 {}", path.string()));
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const std::string token(trim(line));
  if (token.empty())
    throw Error(path.string(), "the token file is empty", "put a token on its first line");
  if (token.size() < 16) {
    throw Error(path.string(), "the token is shorter than 16 characters",
                "use a long random token, e.g. `openssl rand -hex 32`");
  }
  return token;
}

std::string load_or_create_token(const fs::path& path, bool* created) {
  *created = false;
  if (fs::exists(path)) return read_token_file(path);
  write_private_file(path, make_token() + "\n");
  *created = true;
  return read_token_file(path);
}

bool token_matches(std::string_view given, const std::string& token) {
  return !token.empty() && given.size() == token.size() &&
         CRYPTO_memcmp(given.data(), token.data(), token.size()) == 0;
}

// The views point into the request's headers, which outlive the call.
std::string_view presented_token(const httplib::Request& req) {
  constexpr std::string_view kBearer = "Bearer ";
  const auto auth = req.headers.find("Authorization");
  if (auth != req.headers.end() && auth->second.size() > kBearer.size() &&
      auth->second.compare(0, kBearer.size(), kBearer) == 0) {
    return trim(std::string_view(auth->second).substr(kBearer.size()));
  }
  const auto cookies = req.headers.find("Cookie");
  return cookies == req.headers.end() ? std::string_view()
                                      : cookie_value(cookies->second, kTokenCookie);
}

std::optional<Identity> Authenticator::identify_token(std::string_view token) const {
  if (admin_token_.empty() || token_matches(token, admin_token_)) {
    Identity admin;
    admin.admin = true;
    return admin;
  }
  if (token.empty() || !store_) return std::nullopt;
  const std::optional<TokenRecord> r = store_->find(token);
  if (!r) return std::nullopt;
  return Identity{.token_id = r->id,
                  .author = r->author,
                  .admin = false,
                  .max_queued = r->max_queued,
                  .max_body_bytes = r->max_body_bytes};
}

std::optional<Identity> Authenticator::identify(const httplib::Request& req) const {
  return identify_token(presented_token(req));
}

std::string login_cookie(const std::string& token) {
  return fmt::format("{}={}; HttpOnly; SameSite=Strict; Path=/", kTokenCookie, token);
}

}  // namespace fib::serve

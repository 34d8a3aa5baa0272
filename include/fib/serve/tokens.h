// fib serve's identities: every token but the admin's belongs to one author, with its own limits.
// Tokens are made by `fib serve token add`, shown once, and kept only as their SHA-256 (random
// 256-bit tokens need no slow hash: nothing shorter than the token itself finds one from its
// hash), in the state folder's tokens.sqlite3, which a running server reads on every request, so
// an added or revoked token counts at once.
#pragma once

#include <cstddef>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;

namespace fib::serve {

// Who sent a request. The admin (the server's own token, or anyone with --no-auth) submits as
// the author its solution names, reserved authors included; any other token submits as its
// author whatever the solution says, within its limits.
struct Identity {
  std::string token_id;  // "" for the admin; else the start of its hash (`fib serve token list`)
  std::string author;    // the token's author; empty for the admin
  bool admin = false;
  std::size_t max_queued = 0;      // pending and running tasks at once; 0: no limit
  std::size_t max_body_bytes = 0;  // a request body; 0: the server's --max-body-mb
};

inline constexpr std::size_t kDefaultTokenMaxQueued = 16;
inline constexpr std::size_t kDefaultTokenMaxBodyBytes = std::size_t{4} << 20;

// Authors only the admin submits as: "baseline" and the server's --baseline-author (the
// leaderboard compares everyone against them), and "reference".
bool is_reserved_author(std::string_view author, std::string_view baseline_author);

// The SHA-256 of `text`, hex.
std::string sha256_hex(std::string_view text);

struct TokenRecord {
  std::string id;  // the first 12 hex digits of the token's SHA-256
  std::string author;
  std::size_t max_queued = kDefaultTokenMaxQueued;
  std::size_t max_body_bytes = kDefaultTokenMaxBodyBytes;
  double created = 0;  // seconds since the epoch
  double revoked = 0;  // when it was revoked; 0: in use
};

class TokenStore {
 public:
  // Opens (creating) the store. Throws fib::Error when it cannot.
  explicit TokenStore(const std::filesystem::path& file);
  ~TokenStore();
  TokenStore(const TokenStore&) = delete;  // owns the connection
  TokenStore& operator=(const TokenStore&) = delete;

  // Makes a token for `author` and stores its hash; returns the token, which nothing keeps.
  std::string add(TokenRecord& record);
  std::vector<TokenRecord> list() const;
  // Revokes the token whose id starts with `id_prefix` (4 characters at least). Throws
  // fib::Error when none or several match.
  TokenRecord revoke(const std::string& id_prefix);
  // The token's record when it is stored and not revoked.
  std::optional<TokenRecord> find(std::string_view token) const;

 private:
  sqlite3* db_ = nullptr;
  mutable std::mutex mu_;
};

// The state folder's token store file.
std::filesystem::path token_store_file(const std::filesystem::path& state_dir);

}  // namespace fib::serve

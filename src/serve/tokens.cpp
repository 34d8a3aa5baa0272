#include "fib/serve/tokens.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <sqlite3.h>

#include <chrono>

#include "fib/base/diagnostics.h"
#include "serve/auth.h"
#include "serve/sqlite_statement.h"

namespace fib::serve {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  author TEXT NOT NULL,
  max_queued INTEGER NOT NULL,
  max_body_bytes INTEGER NOT NULL,
  created REAL NOT NULL,
  revoked REAL NOT NULL DEFAULT 0
);
)";
constexpr const char* kColumns = "id, author, max_queued, max_body_bytes, created, revoked";
constexpr std::size_t kIdLength = 12;
constexpr std::size_t kMinPrefix = 4;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TokenRecord read_record(const Statement& s) {
  TokenRecord r;
  r.id = s.text(0);
  r.author = s.text(1);
  r.max_queued = static_cast<std::size_t>(s.integer(2));
  r.max_body_bytes = static_cast<std::size_t>(s.integer(3));
  r.created = s.real(4);
  r.revoked = s.real(5);
  return r;
}

void exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string why = message ? message : "unknown error";
    sqlite3_free(message);
    throw Error("token store", why);
  }
}

}  // namespace

bool is_reserved_author(std::string_view author, std::string_view baseline_author) {
  return author == "baseline" || author == "reference" ||
         (!baseline_author.empty() && author == baseline_author);
}

std::string sha256_hex(std::string_view text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(text.data(), text.size(), md, &n, EVP_sha256(), nullptr) != 1) {
    throw Error("sha256", "SHA-256 failed");
  }
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

fs::path token_store_file(const fs::path& state_dir) { return state_dir / "tokens.sqlite3"; }

TokenStore::TokenStore(const fs::path& file) {
  if (sqlite3_open_v2(file.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw Error(file.string(), fmt::format("cannot open the token store: {}", why));
  }
  sqlite3_busy_timeout(db_, 10000);
  try {
    // WAL: `fib serve token add` writes while the server reads.
    exec(db_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
    exec(db_, kSchema);
  } catch (const Error& e) {
    sqlite3_close(db_);
    throw Error(file.string(), fmt::format("not a usable token store: {}", e.what()),
                "move it away to start with an empty one (its tokens stop working)");
  }
}

TokenStore::~TokenStore() { sqlite3_close(db_); }

std::string TokenStore::add(TokenRecord& record) {
  const std::string token = make_token();
  const std::string hash = sha256_hex(token);
  record.id = hash.substr(0, kIdLength);
  record.created = now_seconds();
  record.revoked = 0;
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, fmt::format("INSERT INTO tokens (hash, {}) VALUES (?,?,?,?,?,?,?)", kColumns));
  s.bind(1, hash)
      .bind(2, record.id)
      .bind(3, record.author)
      .bind(4, static_cast<std::int64_t>(record.max_queued))
      .bind(5, static_cast<std::int64_t>(record.max_body_bytes))
      .bind(6, record.created)
      .bind(7, 0.0);
  s.step();
  return token;
}

std::vector<TokenRecord> TokenStore::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, fmt::format("SELECT {} FROM tokens ORDER BY created", kColumns));
  std::vector<TokenRecord> out;
  while (s.step()) out.push_back(read_record(s));
  return out;
}

TokenRecord TokenStore::revoke(const std::string& id_prefix) {
  if (id_prefix.size() < kMinPrefix) {
    throw Error(id_prefix, fmt::format("give at least {} characters of the token's id", kMinPrefix),
                "`fib serve token list` shows the ids");
  }
  std::vector<TokenRecord> matches;
  for (TokenRecord& r : list()) {
    if (r.id.rfind(id_prefix, 0) == 0 && r.revoked == 0) matches.push_back(std::move(r));
  }
  if (matches.size() != 1) {
    throw Error(id_prefix,
                matches.empty() ? "no token in use has an id starting so"
                                : "several tokens' ids start so; give more of the id",
                "`fib serve token list` shows the ids");
  }
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, "UPDATE tokens SET revoked = ? WHERE id = ? AND revoked = 0");
  matches[0].revoked = now_seconds();
  s.bind(1, matches[0].revoked).bind(2, matches[0].id);
  s.step();
  return matches[0];
}

std::optional<TokenRecord> TokenStore::find(std::string_view token) const {
  if (token.empty()) return std::nullopt;
  const std::string hash = sha256_hex(token);
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, fmt::format("SELECT {} FROM tokens WHERE hash = ? AND revoked = 0", kColumns));
  s.bind(1, hash);
  if (!s.step()) return std::nullopt;
  return read_record(s);
}

}  // namespace fib::serve

// One prepared SQLite statement of fib serve's stores (tasks, tokens), finalized when it goes out
// of scope; errors are fib::Error.
#pragma once

#include <fmt/format.h>
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "fib/base/diagnostics.h"

namespace fib::serve {

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
      throw Error("task store", fmt::format("{} ({})", sqlite3_errmsg(db), sql));
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;  // owns the statement
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, std::string_view text) {
    check(
        sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Statement& bind(int i, double value) {
    check(sqlite3_bind_double(stmt_, i, value));
    return *this;
  }
  Statement& bind(int i, int value) {
    check(sqlite3_bind_int(stmt_, i, value));
    return *this;
  }
  Statement& bind(int i, std::int64_t value) {
    check(sqlite3_bind_int64(stmt_, i, value));
    return *this;
  }
  // Steps once: true while a row is available.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) check(rc);
    return false;
  }
  std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }

 private:
  void check(int rc) const {
    if (rc != SQLITE_OK) throw Error("task store", sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace fib::serve

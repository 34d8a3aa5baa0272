// Diagnostics: errors and warnings as values with context (file, JSON path, expected vs found).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fib {

enum class Severity : std::uint8_t { kInfo, kWarning, kError };

std::string_view severity_name(Severity s);  // "info", "warning", "error"

// One finding. `file` names the file (with ":LINE" for JSONL records), `path` is a JSON path
// such as `$.inputs.q.shape[1]`. `hint` is a suggestion ("did you mean 'batch_size'?").
struct Diagnostic {
  Severity severity = Severity::kError;
  std::string file;
  std::string path;
  std::string message;
  std::string hint;

  // "FILE: $.path: error: message (hint)" with the empty parts left out.
  std::string to_string() const;
};

// An ordered collection of findings. Parsers append to one instead of stopping at the first
// problem, so a user sees every mistake in a file at once.
class Diagnostics {
 public:
  void add(Diagnostic d) { items_.push_back(std::move(d)); }
  void error(std::string file, std::string path, std::string message, std::string hint = {});
  void warning(std::string file, std::string path, std::string message, std::string hint = {});
  void info(std::string file, std::string path, std::string message, std::string hint = {});
  void append(const Diagnostics& other);

  bool has_errors() const;
  std::size_t count(Severity s) const;
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  // All findings, one per line.
  std::string to_string() const;

 private:
  std::vector<Diagnostic> items_;
};

// Thrown where a caller cannot go on (a missing dataset root, an unreadable file). Carries
// the findings that explain why; what() is their text.
class Error : public std::runtime_error {
 public:
  explicit Error(Diagnostics diagnostics);
  explicit Error(Diagnostic diagnostic);
  Error(std::string file, std::string message, std::string hint = {});
  const Diagnostics& diagnostics() const { return diagnostics_; }

 private:
  Diagnostics diagnostics_;
};

}  // namespace fib

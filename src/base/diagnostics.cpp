#include "fib/base/diagnostics.h"

#include <algorithm>

namespace fib {

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "error";
}

std::string Diagnostic::to_string() const {
  std::string out;
  if (!file.empty()) out += file + ": ";
  if (!path.empty()) out += path + ": ";
  out += severity_name(severity);
  out += ": ";
  out += message;
  if (!hint.empty()) out += " (" + hint + ")";
  return out;
}

void Diagnostics::error(std::string file, std::string path, std::string message, std::string hint) {
  items_.push_back(
      {Severity::kError, std::move(file), std::move(path), std::move(message), std::move(hint)});
}
void Diagnostics::warning(std::string file, std::string path, std::string message,
                          std::string hint) {
  items_.push_back(
      {Severity::kWarning, std::move(file), std::move(path), std::move(message), std::move(hint)});
}
void Diagnostics::info(std::string file, std::string path, std::string message, std::string hint) {
  items_.push_back(
      {Severity::kInfo, std::move(file), std::move(path), std::move(message), std::move(hint)});
}
void Diagnostics::append(const Diagnostics& other) {
  items_.insert(items_.end(), other.items_.begin(), other.items_.end());
}

bool Diagnostics::has_errors() const { return count(Severity::kError) > 0; }

std::size_t Diagnostics::count(Severity s) const {
  return static_cast<std::size_t>(std::count_if(
      items_.begin(), items_.end(), [s](const Diagnostic& d) { return d.severity == s; }));
}

std::string Diagnostics::to_string() const {
  std::string out;
  for (const auto& d : items_) {
    out += d.to_string();
    out += '\n';
  }
  return out;
}

Error::Error(Diagnostics diagnostics)
    : std::runtime_error([&] {
        std::string s = diagnostics.to_string();
        if (!s.empty() && s.back() == '\n') s.pop_back();
        return s;
      }()),
      diagnostics_(std::move(diagnostics)) {}

Error::Error(Diagnostic diagnostic)
    : Error([&] {
        Diagnostics d;
        d.add(std::move(diagnostic));
        return d;
      }()) {}

Error::Error(std::string file, std::string message, std::string hint)
    : Error(
          Diagnostic{Severity::kError, std::move(file), {}, std::move(message), std::move(hint)}) {}

}  // namespace fib

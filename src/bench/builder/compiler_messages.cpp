// Compiler diagnostics read from a build log (include/fib/bench/builder/compiler_messages.h).
// Hand-written scanning, not std::regex: a log line can be tens of kilobytes (a solution's
// `#error` with a long text), which libstdc++'s recursive regex matcher may not survive.
#include "fib/bench/builder/compiler_messages.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

namespace fib::bench {

namespace {

constexpr std::string_view kAbiHeader = "include/fib/solution.h";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The digits at the start of `s` as a number, and how many there were (0: none).
std::size_t read_number(std::string_view s, int* value) {
  std::size_t n = 0;
  long v = 0;
  while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n])) && n < 9) {
    v = v * 10 + (s[n] - '0');
    ++n;
  }
  *value = static_cast<int>(v);
  return n;
}

// A severity word at the start of `s`, as fib names it, and its length; nullopt when `s` does not
// start with one. nvcc's front end writes "catastrophic error" for gcc's "fatal error".
std::optional<std::pair<std::string, std::size_t>> read_severity(std::string_view s) {
  static constexpr std::pair<std::string_view, std::string_view> kWords[] = {
      {"fatal error", "fatal error"},
      {"catastrophic error", "fatal error"},
      {"error", "error"},
      {"warning", "warning"},
      {"note", "note"},
      {"remark", "remark"}};
  for (const auto& [word, name] : kWords) {
    if (starts_with(s, word)) return std::make_pair(std::string(name), word.size());
  }
  return std::nullopt;
}

// After the location: "<severity>[ #<number>[-D]]: <message>"; false when it is not that.
bool read_tail(std::string_view rest, CompilerMessage* m) {
  const auto sev = read_severity(rest);
  if (!sev) {
    // The linker names a source (and with -g a line) for an undefined or duplicate symbol.
    if (starts_with(rest, "undefined reference") || starts_with(rest, "multiple definition")) {
      m->severity = "error";
      m->message = std::string(rest);
      return true;
    }
    return false;
  }
  rest.remove_prefix(sev->second);
  if (starts_with(rest, " #")) {  // nvcc's diagnostic number: "error #20-D:"
    const std::size_t end = rest.find(':');
    if (end == std::string_view::npos) return false;
    rest.remove_prefix(end);
  }
  if (!starts_with(rest, ": ")) return false;
  m->severity = sev->first;
  m->message = std::string(rest.substr(2));
  return true;
}

// gcc and clang: "file:line[:col]: severity: message".
bool read_gcc(std::string_view line, CompilerMessage* m) {
  for (std::size_t colon = line.find(':'); colon != std::string_view::npos && colon > 0;
       colon = line.find(':', colon + 1)) {
    std::string_view rest = line.substr(colon + 1);
    int number = 0;
    const std::size_t digits = read_number(rest, &number);
    if (digits == 0 || digits >= rest.size() || rest[digits] != ':') continue;
    m->file = std::string(line.substr(0, colon));
    m->line = number;
    rest.remove_prefix(digits + 1);
    int column = 0;
    const std::size_t col_digits = read_number(rest, &column);
    if (col_digits > 0 && col_digits < rest.size() && rest[col_digits] == ':') {
      m->column = column;
      rest.remove_prefix(col_digits + 1);
    }
    if (starts_with(rest, " ")) rest.remove_prefix(1);
    return read_tail(rest, m);
  }
  return false;
}

// nvcc's front end: "file(line)[ (col. N)]: severity[ #N-D]: message".
bool read_nvcc(std::string_view line, CompilerMessage* m) {
  const std::size_t open = line.find('(');
  if (open == std::string_view::npos || open == 0) return false;
  std::string_view rest = line.substr(open + 1);
  int number = 0;
  const std::size_t digits = read_number(rest, &number);
  if (digits == 0 || digits >= rest.size() || rest[digits] != ')') return false;
  m->file = std::string(line.substr(0, open));
  m->line = number;
  rest.remove_prefix(digits + 1);
  if (starts_with(rest, " (col. ")) {
    int column = 0;
    const std::size_t n = read_number(rest.substr(7), &column);
    if (n == 0 || rest.substr(7 + n, 1) != ")") return false;
    m->column = column;
    rest.remove_prefix(7 + n + 1);
  }
  if (!starts_with(rest, ": ")) return false;
  return read_tail(rest.substr(2), m);
}

// The linker without a line: "file:(.text+0x1c): undefined reference to `f'".
bool read_linker(std::string_view line, CompilerMessage* m) {
  const std::size_t at = line.find(":(");
  if (at == std::string_view::npos || at == 0) return false;
  const std::size_t close = line.find("): ", at);
  if (close == std::string_view::npos) return false;
  m->file = std::string(line.substr(0, at));
  return read_tail(line.substr(close + 3), m);
}

// ptxas and nvcc's driver: "ptxas error   : message", "nvcc fatal   : message".
bool read_tool(std::string_view line, CompilerMessage* m) {
  for (std::string_view tool : {"ptxas ", "nvcc "}) {
    if (!starts_with(line, tool)) continue;
    std::string_view rest = line.substr(tool.size());
    std::string severity;
    if (starts_with(rest, "fatal")) {
      severity = "fatal error";
    } else if (starts_with(rest, "error")) {
      severity = "error";
    } else if (starts_with(rest, "warning")) {
      severity = "warning";
    } else {
      return false;  // "ptxas info": register counts, not a diagnostic
    }
    const std::size_t colon = rest.find(':');
    if (colon == std::string_view::npos) return false;
    m->severity = severity;
    std::string_view text = rest.substr(colon + 1);
    while (starts_with(text, " ")) text.remove_prefix(1);
    m->message = fmt::format("{}: {}", tool.substr(0, tool.size() - 1), text);
    return true;
  }
  return false;
}

// A file as the solution names it, and where it comes from.
void name_file(CompilerMessage* m, std::span<const std::string> sources) {
  if (m->file.empty()) return;
  std::string_view f = m->file;
  while (starts_with(f, "./")) f.remove_prefix(2);
  for (const std::string& s : sources) {
    if (f == s || ends_with(f, "/" + s)) {
      m->file = s;
      m->origin = "solution";
      return;
    }
  }
  if (ends_with(f, kAbiHeader)) {
    m->file = "fib/solution.h";
    m->origin = "fib";
    return;
  }
  m->file = std::string(f);
  m->origin = "toolchain";
}

std::string_view trimmed_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  return line;
}

}  // namespace

CompilerMessages parse_compiler_messages(std::string_view log,
                                         std::span<const std::string> sources) {
  CompilerMessages out;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    const std::string_view line = trimmed_line(log.substr(start, end - start));
    start = end + 1;
    // fib's own lines ("# exit status 1", "$ c++ ...") are not the compiler's.
    if (line.empty() || line.front() == '#' || line.front() == '$' || line.front() == ' ') {
      continue;
    }
    CompilerMessage m;
    if (!read_tool(line, &m) && !read_nvcc(line, &m) && !read_gcc(line, &m) &&
        !read_linker(line, &m)) {
      continue;
    }
    name_file(&m, sources);
    if (m.message.size() > kMaxCompilerMessageBytes) {
      m.message.resize(kMaxCompilerMessageBytes);
      m.message += "...";
    }
    if (m.severity == "error" || m.severity == "fatal error") ++out.errors;
    if (m.severity == "warning") ++out.warnings;
    if (out.messages.size() < kMaxCompilerMessages) {
      out.messages.push_back(std::move(m));
    } else {
      ++out.omitted;
    }
  }
  return out;
}

Json to_json(const CompilerMessages& m) {
  Json list = Json::array();
  for (const CompilerMessage& c : m.messages) {
    Json j = Json::object();
    if (!c.file.empty()) {
      j["file"] = c.file;
      j["origin"] = c.origin;
    }
    if (c.line > 0) j["line"] = c.line;
    if (c.column > 0) j["column"] = c.column;
    j["severity"] = c.severity;
    j["message"] = c.message;
    list.push_back(std::move(j));
  }
  return Json{{"errors", m.errors},
              {"warnings", m.warnings},
              {"omitted", m.omitted},
              {"messages", std::move(list)}};
}

std::string render_compiler_messages(const CompilerMessages& m) {
  std::string out;
  for (const CompilerMessage& c : m.messages) {
    std::string where = c.file;
    if (c.line > 0) where += fmt::format(":{}", c.line);
    if (c.column > 0) where += fmt::format(":{}", c.column);
    out += fmt::format("  {}{}{}: {}\n", where, where.empty() ? "" : ": ", c.severity, c.message);
  }
  if (m.omitted > 0) out += fmt::format("  ... and {} more\n", m.omitted);
  return out;
}

}  // namespace fib::bench

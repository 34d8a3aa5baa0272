#include "fib/base/json.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

namespace fib {

std::optional<std::string> read_text_file(const std::string& path, Diagnostics& diag,
                                          std::uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) {
      diag.error(path, {}, "file not found");
    } else if (e == ELOOP) {
      diag.error(path, {}, "symbolic link loop", "fix or remove the link");
    } else {
      diag.error(path, {}, fmt::format("cannot open: {}", std::strerror(e)));
    }
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    diag.error(path, {}, fmt::format("cannot stat: {}", std::strerror(errno)));
    ::close(fd);
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) {
    diag.error(path, {}, "is a directory, expected a file");
    ::close(fd);
    return std::nullopt;
  }
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    diag.error(
        path, {},
        fmt::format("file is {} bytes, larger than the {} byte limit", st.st_size, max_bytes));
    ::close(fd);
    return std::nullopt;
  }
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      diag.error(path, {}, fmt::format("read failed: {}", std::strerror(errno)));
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_bytes) {
      diag.error(path, {}, fmt::format("file is larger than the {} byte limit", max_bytes));
      ::close(fd);
      return std::nullopt;
    }
  }
  ::close(fd);
  return out;
}

namespace {

// Finds the first place nesting exceeds kMaxJsonDepth (outside strings), or npos.
std::size_t too_deep_at(std::string_view text) {
  // Fast path: with no more opening brackets in all (strings included) than the limit, nothing
  // can nest deeper. Counting is a simple loop the compiler vectorizes; most records take it.
  std::size_t opens = 0;
  for (const char c : text) opens += static_cast<std::size_t>(c == '[' || c == '{');
  if (opens <= static_cast<std::size_t>(kMaxJsonDepth)) return std::string_view::npos;
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

std::pair<std::size_t, std::size_t> line_col(std::string_view text, std::size_t offset) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

}  // namespace

std::optional<Json> parse_json(std::string_view text, const std::string& file, Diagnostics& diag) {
  if (const std::size_t at = too_deep_at(text); at != std::string_view::npos) {
    auto [l, c] = line_col(text, at);
    diag.error(
        file, {},
        fmt::format("line {}, column {}: JSON nests deeper than {} levels", l, c, kMaxJsonDepth));
    return std::nullopt;
  }
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // e.byte is the 1-based offset of the offending character.
    auto [l, c] = line_col(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    // Keep nlohmann's explanation, drop its "[json.exception...] parse error at ...: " prefix.
    if (auto p = what.find(": "); p != std::string::npos && what.rfind("[json.exception", 0) == 0) {
      what = what.substr(p + 2);
    }
    diag.error(file, {}, fmt::format("line {}, column {}: invalid JSON: {}", l, c, what));
  } catch (const std::exception& e) {
    diag.error(file, {}, fmt::format("invalid JSON: {}", e.what()));
  }
  return std::nullopt;
}

std::optional<Json> read_json_file(const std::string& path, Diagnostics& diag) {
  auto text = read_text_file(path, diag);
  if (!text) return std::nullopt;
  return parse_json(*text, path, diag);
}

std::string dump_json_pretty(const Json& j) {
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string dump_json_line(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace fib

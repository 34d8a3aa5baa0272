#include "fib/trace/python_signature.h"

#include <cctype>

namespace fib {

namespace {

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// Skips a string literal starting at s[i] (a quote); returns the index after it.
std::size_t skip_string(std::string_view s, std::size_t i) {
  const char q = s[i];
  const bool triple = s.substr(i, 3) == std::string(3, q);
  std::size_t j = i + (triple ? 3 : 1);
  while (j < s.size()) {
    if (s[j] == '\\') {
      j += 2;
      continue;
    }
    if (triple ? s.substr(j, 3) == std::string(3, q) : s[j] == q) return j + (triple ? 3 : 1);
    ++j;
  }
  return s.size();
}

}  // namespace

std::optional<PythonSignature> find_top_level_function(std::string_view source,
                                                       std::string_view name, std::string* error) {
  // Walk the source line by line, skipping string literals so a `def run` inside a docstring
  // does not count.
  std::size_t i = 0;
  int line = 1;
  while (i < source.size()) {
    const bool line_start = i == 0 || source[i - 1] == '\n';
    if (line_start && source.substr(i, 4) == "def ") {
      std::size_t j = i + 4;
      while (j < source.size() && source[j] == ' ') ++j;
      std::size_t k = j;
      while (k < source.size() && is_ident_char(source[k])) ++k;
      if (source.substr(j, k - j) == name) {
        while (k < source.size() && source[k] == ' ') ++k;
        if (k >= source.size() || source[k] != '(') {
          if (error) *error = "'def " + std::string(name) + "' is not followed by '('";
          return std::nullopt;
        }
        // Read up to the matching ')', splitting on top-level commas.
        PythonSignature sig;
        sig.line = line;
        int depth = 0;
        std::string current;
        std::vector<std::string> parts;
        std::size_t p = k + 1;
        bool closed = false;
        for (; p < source.size(); ++p) {
          const char c = source[p];
          if (c == '"' || c == '\'') {
            const std::size_t e = skip_string(source, p);
            current.append(source.substr(p, e - p));
            p = e - 1;
            continue;
          }
          if (c == '#') {  // comment to end of line
            while (p < source.size() && source[p] != '\n') ++p;
            continue;
          }
          if (c == '(' || c == '[' || c == '{') ++depth;
          if (c == ')' || c == ']' || c == '}') {
            if (depth == 0 && c == ')') {
              closed = true;
              break;
            }
            --depth;
          }
          if (c == ',' && depth == 0) {
            parts.push_back(current);
            current.clear();
            continue;
          }
          current += c;
        }
        if (!closed) {
          if (error) *error = "the parameter list of 'def " + std::string(name) + "' is not closed";
          return std::nullopt;
        }
        parts.push_back(current);
        for (const auto& raw : parts) {
          std::string part = trim(raw);
          if (part.empty()) continue;  // trailing comma
          if (part == "/" || part == "*") continue;
          if (part.rfind("**", 0) == 0) {
            sig.has_var_keyword = true;
            continue;
          }
          if (part[0] == '*') {
            sig.has_var_positional = true;
            continue;
          }
          std::size_t n = 0;
          while (n < part.size() && is_ident_char(part[n])) ++n;
          if (n == 0 || std::isdigit(static_cast<unsigned char>(part[0]))) {
            if (error) *error = "cannot read parameter '" + part + "'";
            return std::nullopt;
          }
          sig.params.push_back(part.substr(0, n));
        }
        return sig;
      }
    }
    const char c = source[i];
    if (c == '"' || c == '\'') {
      const std::size_t e = skip_string(source, i);
      for (std::size_t q = i; q < e; ++q) line += source[q] == '\n' ? 1 : 0;
      i = e;
      continue;
    }
    if (c == '#') {
      while (i < source.size() && source[i] != '\n') ++i;
      continue;
    }
    if (c == '\n') ++line;
    ++i;
  }
  return std::nullopt;
}

}  // namespace fib

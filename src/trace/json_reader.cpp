#include "fib/trace/json_reader.h"

#include <fmt/format.h>
#include <cmath>
#include <limits>

#include "fib/trace/suggest.h"

namespace fib {

std::string JsonPath::str() const {
  std::vector<const JsonPath*> chain;
  for (const JsonPath* p = this; p != nullptr; p = p->parent_) chain.push_back(p);
  std::string out = "$";
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const JsonPath* p = *it;
    if (p->kind_ == Kind::kKey) {
      bool plain = !p->key_.empty();
      for (char c : p->key_) {
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) plain = false;
      }
      if (plain) {
        out += '.';
        out += p->key_;
      } else {
        // Quoted like a JSON string, so a key holding '"', '\\' or a newline reads unambiguously.
        out += "[\"";
        for (char c : p->key_) {
          const auto u = static_cast<unsigned char>(c);
          if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
          } else if (c == '\n') {
            out += "\\n";
          } else if (c == '\t') {
            out += "\\t";
          } else if (u < 0x20) {
            out += fmt::format("\\u{:04x}", u);
          } else {
            out += c;
          }
        }
        out += "\"]";
      }
    } else if (p->kind_ == Kind::kIndex) {
      out += '[' + std::to_string(p->index_) + ']';
    }
  }
  return out;
}

void KeyOrder::push(int field) {
  if (count_ >= 16 || field < 0 || field > 15) return;
  packed_ |= static_cast<std::uint64_t>(field) << (4 * count_);
  ++count_;
}

bool KeyOrder::contains(int field) const {
  for (int i = 0; i < count_; ++i) {
    if (at(i) == field) return true;
  }
  return false;
}

void ReadContext::error(const JsonPath& path, std::string message, std::string hint) const {
  ++errors;
  if (diag) diag->error(file, path.str(), std::move(message), std::move(hint));
}
void ReadContext::warning(const JsonPath& path, std::string message, std::string hint) const {
  if (diag) diag->warning(file, path.str(), std::move(message), std::move(hint));
}

std::string_view json_kind(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    default:
      return "value";
  }
}

std::string json_preview(const Json& j) {
  if (j.is_object()) return "{...}";
  if (j.is_array()) return fmt::format("[...] ({} items)", j.size());
  std::string s = j.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

namespace {
std::string found_text(const Json& v) {
  if (v.is_object() || v.is_array() || v.is_null()) return std::string(json_kind(v));
  return fmt::format("{} {}", json_kind(v), json_preview(v));
}
}  // namespace

bool read_object(const Json& j, const JsonPath& path, const ReadContext& ctx,
                 std::span<const std::string_view> fields, std::span<const Json*> found,
                 KeyOrder* order) {
  for (auto& f : found) f = nullptr;
  if (!j.is_object()) {
    ctx.error(path, fmt::format("expected an object, found {}", found_text(j)));
    return false;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    bool known = false;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (fields[i] == k) {
        found[i] = &it.value();
        if (order) order->push(static_cast<int>(i));
        known = true;
        break;
      }
    }
    if (!known) {
      ctx.error(path.key(k), fmt::format("unknown field '{}'", k), suggest(k, fields));
    }
  }
  return true;
}

bool require_field(const Json* v, std::string_view field, const JsonPath& parent,
                   const ReadContext& ctx) {
  if (v != nullptr) return true;
  ctx.error(parent, fmt::format("missing required field '{}'", field));
  return false;
}

std::optional<std::string> read_string(const Json& v, const JsonPath& path, const ReadContext& ctx,
                                       bool allow_empty) {
  if (!v.is_string()) {
    ctx.error(path, fmt::format("expected a string, found {}", found_text(v)));
    return std::nullopt;
  }
  const auto& s = v.get_ref<const std::string&>();
  if (!allow_empty && s.empty()) {
    ctx.error(path, "expected a non-empty string, found \"\"");
    return std::nullopt;
  }
  return s;
}

std::optional<std::int64_t> read_int(const Json& v, const JsonPath& path, const ReadContext& ctx) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<std::int64_t>();
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return static_cast<std::int64_t>(u);
    }
    ctx.error(path, fmt::format("integer {} is out of range (at most 2^63-1)", u));
    return std::nullopt;
  }
  ctx.error(path, fmt::format("expected an integer, found {}", found_text(v)));
  return std::nullopt;
}

std::optional<double> read_number(const Json& v, const JsonPath& path, const ReadContext& ctx) {
  if (v.is_number()) return v.get<double>();
  ctx.error(path, fmt::format("expected a number, found {}", found_text(v)));
  return std::nullopt;
}

std::optional<bool> read_bool(const Json& v, const JsonPath& path, const ReadContext& ctx) {
  if (v.is_boolean()) return v.get<bool>();
  ctx.error(path, fmt::format("expected true or false, found {}", found_text(v)));
  return std::nullopt;
}

std::optional<std::vector<std::string>> read_string_list(const Json& v, const JsonPath& path,
                                                         const ReadContext& ctx) {
  if (!v.is_array()) {
    ctx.error(path, fmt::format("expected an array of strings, found {}", found_text(v)));
    return std::nullopt;
  }
  std::vector<std::string> out;
  out.reserve(v.size());
  bool ok = true;
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto s = read_string(v[i], path.index(i), ctx);
    if (s) {
      out.push_back(std::move(*s));
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<double> read_extended_number(const Json& v, const JsonPath& path,
                                           const ReadContext& ctx) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity" || s == "inf" || s == "+Infinity")
      return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  ctx.error(path,
            fmt::format("expected a number (or \"NaN\", \"Infinity\"), found {}", found_text(v)));
  return std::nullopt;
}

Json write_extended_number(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return x;
}

Json write_object(std::span<const std::string_view> fields, std::span<Json> values,
                  const KeyOrder& order, std::span<const bool> always) {
  Json out = Json::object();
  std::vector<bool> done(fields.size(), false);
  auto emit = [&](std::size_t i, bool was_present) {
    if (done[i]) return;
    done[i] = true;
    if (values[i].is_null() && !was_present && !always[i]) return;
    out[std::string(fields[i])] = std::move(values[i]);
  };
  for (int k = 0; k < order.size(); ++k) {
    auto i = static_cast<std::size_t>(order.at(k));
    if (i < fields.size()) emit(i, true);
  }
  for (std::size_t i = 0; i < fields.size(); ++i) emit(i, false);
  return out;
}

}  // namespace fib

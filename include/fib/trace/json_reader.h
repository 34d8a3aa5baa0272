// Strict JSON reading: typed field access that reports file, JSON path, expected vs found,
// and "did you mean" for unknown keys. The building block of every schema reader in fib.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/base/json.h"

namespace fib {

// A JSON path built on the stack without allocating; rendered only when a finding needs it.
// A child refers to its parent, so a path must not outlive the one it was made from: pass
// `root.key("a").key("b")` straight to a call, but to keep it in a variable, name each level
// (`const JsonPath a = root.key("a"); const JsonPath b = a.key("b");`).
class JsonPath {
 public:
  JsonPath() = default;
  JsonPath key(std::string_view k) const { return JsonPath(this, k, 0, Kind::kKey); }
  JsonPath index(std::size_t i) const { return JsonPath(this, {}, i, Kind::kIndex); }
  std::string str() const;  // "$", "$.inputs.q.shape[1]", "$.axes[\"odd key\"]"

 private:
  enum class Kind : std::uint8_t { kRoot, kKey, kIndex };
  JsonPath(const JsonPath* parent, std::string_view k, std::size_t i, Kind kind)
      : parent_(parent), key_(k), index_(i), kind_(kind) {}
  const JsonPath* parent_ = nullptr;
  std::string_view key_;
  std::size_t index_ = 0;
  Kind kind_ = Kind::kRoot;
};

// Records which fields an object had and in which order, so that writing it back reproduces
// the original key order. Holds up to 16 fields of a fixed field list (by index).
class KeyOrder {
 public:
  void push(int field);
  bool contains(int field) const;
  int size() const { return count_; }
  int at(int i) const { return static_cast<int>((packed_ >> (4 * i)) & 0xF); }
  bool operator==(const KeyOrder&) const = default;

 private:
  std::uint64_t packed_ = 0;
  std::uint8_t count_ = 0;
};

// Where findings go while reading one document.
struct ReadContext {
  std::string file;  // "definitions/gemm/x.json" or "traces/a/b/c.jsonl:12"
  Diagnostics* diag = nullptr;
  // Errors reported through this context so far. A reader returns nothing when any error was
  // reported while it read its record, so a record with an unknown field is never used.
  mutable std::size_t errors = 0;

  void error(const JsonPath& path, std::string message, std::string hint = {}) const;
  void warning(const JsonPath& path, std::string message, std::string hint = {}) const;
};

// "string", "integer", "number", "object", "array", "boolean", "null".
std::string_view json_kind(const Json& j);
// A short rendering of a value for messages: `"abc"`, `12`, `{...}` (truncated when long).
std::string json_preview(const Json& j);

// Reads an object whose keys must come from `fields`. found[i] points at the value of
// fields[i] (or is null). Unknown keys are errors with a suggestion. Returns false (after
// reporting) when `j` is not an object.
bool read_object(const Json& j, const JsonPath& path, const ReadContext& ctx,
                 std::span<const std::string_view> fields, std::span<const Json*> found,
                 KeyOrder* order);

// Reports a missing required field; returns whether it is present.
bool require_field(const Json* v, std::string_view field, const JsonPath& parent,
                   const ReadContext& ctx);

// Typed getters: each reports "expected X, found Y" at `path` and returns nullopt on mismatch.
std::optional<std::string> read_string(const Json& v, const JsonPath& path, const ReadContext& ctx,
                                       bool allow_empty = true);
std::optional<std::int64_t> read_int(const Json& v, const JsonPath& path, const ReadContext& ctx);
std::optional<double> read_number(const Json& v, const JsonPath& path, const ReadContext& ctx);
std::optional<bool> read_bool(const Json& v, const JsonPath& path, const ReadContext& ctx);
std::optional<std::vector<std::string>> read_string_list(const Json& v, const JsonPath& path,
                                                         const ReadContext& ctx);
// A number that may also be written as the strings "NaN", "Infinity", "-Infinity" (how the
// upstream schema serializes non-finite errors).
std::optional<double> read_extended_number(const Json& v, const JsonPath& path,
                                           const ReadContext& ctx);
Json write_extended_number(double x);

// Emits `fields` present in `values` (index-aligned with the field list): first in the
// recorded order, then the rest in list order. A value that is null is written only when the
// original object had that key (so `"solution": null` survives a round trip).
Json write_object(std::span<const std::string_view> fields, std::span<Json> values,
                  const KeyOrder& order, std::span<const bool> always);

}  // namespace fib

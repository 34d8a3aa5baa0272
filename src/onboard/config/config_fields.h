// Reading config.json fields under any of their spellings, with the language model's
// text_config merged in, contradictions reported, and every default recorded as a note.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/trace/json_reader.h"

namespace fib::onboard::detail {

class ConfigFields {
 public:
  ConfigFields(const Json& top, const ReadContext& ctx, std::vector<std::string>& notes);

  // The value of the first present spelling (JSON null counts as absent). When several
  // spellings are present with different values, or the field is both in text_config and at
  // the top level with different values, that is an error naming both.
  std::optional<std::int64_t> integer(std::initializer_list<std::string_view> names);
  std::optional<double> number(std::initializer_list<std::string_view> names);
  std::optional<bool> boolean(std::initializer_list<std::string_view> names);
  std::optional<std::string> string(std::initializer_list<std::string_view> names);
  const Json* value(std::initializer_list<std::string_view> names);  // any JSON kind

  // Like integer() but missing is an error ("missing field 'hidden_size' (also spelled ...)").
  std::optional<std::int64_t> required_integer(std::initializer_list<std::string_view> names,
                                               std::string_view hint = {});
  // A positive integer, or the default (noted as "<field>: absent, using <default> (<why>)").
  std::int64_t integer_or(std::initializer_list<std::string_view> names, std::int64_t def,
                          std::string_view why);
  double number_or(std::initializer_list<std::string_view> names, double def, std::string_view why);
  bool boolean_or(std::initializer_list<std::string_view> names, bool def,
                  std::string_view why = {});

  bool has(std::string_view name) const;
  bool in_text_config(std::string_view name) const;

  // Findings about a field, at its JSON path ($.name or $.text_config.name).
  void error(std::string_view field, std::string message, std::string hint = {}) const;
  void note(std::string line) { notes_.push_back(std::move(line)); }
  bool failed() const { return failed_; }

 private:
  struct Found {
    std::string_view name;
    const Json* value = nullptr;
  };
  std::optional<Found> find(std::initializer_list<std::string_view> names);
  std::optional<std::int64_t> as_integer(const Found& f) const;
  std::optional<double> as_number(const Found& f) const;
  std::optional<bool> as_boolean(const Found& f) const;
  const Json* lookup(std::string_view name) const;

  const Json* top_;
  const Json* text_ = nullptr;
  const ReadContext& ctx_;
  std::vector<std::string>& notes_;
  mutable bool failed_ = false;
};

}  // namespace fib::onboard::detail

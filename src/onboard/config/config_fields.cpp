#include "onboard/config/config_fields.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "onboard/json_util.h"

namespace fib::onboard::detail {

namespace {

std::string spellings(std::initializer_list<std::string_view> names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

ConfigFields::ConfigFields(const Json& top, const ReadContext& ctx, std::vector<std::string>& notes)
    : top_(&top), ctx_(ctx), notes_(notes) {
  if (const Json* t = member(top, "text_config"); t && t->is_object()) text_ = t;
}

const Json* ConfigFields::lookup(std::string_view name) const {
  if (text_) {
    if (const Json* v = member(*text_, name)) return v;
  }
  return member(*top_, name);
}

bool ConfigFields::has(std::string_view name) const { return lookup(name) != nullptr; }

bool ConfigFields::in_text_config(std::string_view name) const {
  return text_ && member(*text_, name);
}

void ConfigFields::error(std::string_view field, std::string message, std::string hint) const {
  failed_ = true;
  const JsonPath root;
  if (in_text_config(field)) {
    ctx_.error(root.key("text_config").key(field), std::move(message), std::move(hint));
  } else {
    ctx_.error(root.key(field), std::move(message), std::move(hint));
  }
}

std::optional<ConfigFields::Found> ConfigFields::find(
    std::initializer_list<std::string_view> names) {
  std::optional<Found> first;
  for (auto name : names) {
    // A field given both in text_config and at the top level must agree: the text model's
    // dimensions are what we plan, and a disagreement means the file is not one model.
    if (text_) {
      const Json* t = member(*text_, name);
      const Json* o = member(*top_, name);
      if (t && o && *t != *o) {
        error(name, fmt::format("contradictory values: text_config.{} = {} but {} = {}", name,
                                json_preview(*t), name, json_preview(*o)));
      }
    }
    const Json* v = lookup(name);
    if (!v) continue;
    if (!first) {
      first = Found{name, v};
    } else if (*first->value != *v) {
      error(name,
            fmt::format("contradictory values: {} = {} but {} = {}", first->name,
                        json_preview(*first->value), name, json_preview(*v)),
            "these are spellings of one field; keep one");
    }
  }
  if (first && first->name != *names.begin()) {
    note(fmt::format("{}: read from '{}'", *names.begin(), first->name));
  }
  return first;
}

const Json* ConfigFields::value(std::initializer_list<std::string_view> names) {
  auto f = find(names);
  return f ? f->value : nullptr;
}

std::optional<std::int64_t> ConfigFields::as_integer(const Found& f) const {
  const Json& v = *f.value;
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9e15)
      return static_cast<std::int64_t>(d);
  }
  error(f.name, fmt::format("expected an integer, found {} {}", json_kind(v), json_preview(v)));
  return std::nullopt;
}

std::optional<double> ConfigFields::as_number(const Found& f) const {
  if (f.value->is_number()) return f.value->get<double>();
  error(f.name,
        fmt::format("expected a number, found {} {}", json_kind(*f.value), json_preview(*f.value)));
  return std::nullopt;
}

std::optional<bool> ConfigFields::as_boolean(const Found& f) const {
  if (f.value->is_boolean()) return f.value->get<bool>();
  error(f.name, fmt::format("expected true or false, found {} {}", json_kind(*f.value),
                            json_preview(*f.value)));
  return std::nullopt;
}

std::optional<std::int64_t> ConfigFields::integer(std::initializer_list<std::string_view> names) {
  auto f = find(names);
  return f ? as_integer(*f) : std::nullopt;
}

std::optional<double> ConfigFields::number(std::initializer_list<std::string_view> names) {
  auto f = find(names);
  return f ? as_number(*f) : std::nullopt;
}

std::optional<bool> ConfigFields::boolean(std::initializer_list<std::string_view> names) {
  auto f = find(names);
  return f ? as_boolean(*f) : std::nullopt;
}

std::optional<std::string> ConfigFields::string(std::initializer_list<std::string_view> names) {
  auto f = find(names);
  if (!f) return std::nullopt;
  if (f->value->is_string()) return f->value->get<std::string>();
  error(f->name, fmt::format("expected a string, found {} {}", json_kind(*f->value),
                             json_preview(*f->value)));
  return std::nullopt;
}

std::optional<std::int64_t> ConfigFields::required_integer(
    std::initializer_list<std::string_view> names, std::string_view hint) {
  auto f = find(names);
  if (!f) {
    const std::string also = names.size() > 1
                                 ? fmt::format(" (accepted spellings: {})", spellings(names))
                                 : std::string();
    error(*names.begin(), fmt::format("missing field '{}'{}", *names.begin(), also),
          std::string(hint));
    return std::nullopt;
  }
  auto v = as_integer(*f);
  if (v && *v <= 0) {
    error(f->name, fmt::format("'{}' must be positive, found {}", f->name, *v));
    return std::nullopt;
  }
  return v;
}

std::int64_t ConfigFields::integer_or(std::initializer_list<std::string_view> names,
                                      std::int64_t def, std::string_view why) {
  auto f = find(names);
  if (!f) {
    if (!why.empty()) note(fmt::format("{}: absent, using {} ({})", *names.begin(), def, why));
    return def;
  }
  auto v = as_integer(*f);
  if (v && *v < 0) {
    error(f->name, fmt::format("'{}' must not be negative, found {}", f->name, *v));
    return def;
  }
  return v.value_or(def);
}

double ConfigFields::number_or(std::initializer_list<std::string_view> names, double def,
                               std::string_view why) {
  auto f = find(names);
  if (!f) {
    if (!why.empty()) note(fmt::format("{}: absent, using {:g} ({})", *names.begin(), def, why));
    return def;
  }
  return as_number(*f).value_or(def);
}

bool ConfigFields::boolean_or(std::initializer_list<std::string_view> names, bool def,
                              std::string_view why) {
  auto f = find(names);
  if (!f) {
    if (!why.empty()) note(fmt::format("{}: absent, using {} ({})", *names.begin(), def, why));
    return def;
  }
  return as_boolean(*f).value_or(def);
}

}  // namespace fib::onboard::detail

// The definition check: each definition's reference matches its interface, and definitions of
// one family (same name pattern) agree on their interface, hidden constants and tags.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "fib/trace/suggest.h"
#include "validate/checks.h"

namespace fib::validate::detail {

namespace {

constexpr std::string_view kKnownTagPrefixes[] = {"model",  "tp",           "ep",     "stage",
                                                  "status", "quantization", "fi_api", "gpu",
                                                  "layout", "routing",      "sparse"};

std::string file_of(const Context& ctx, const Definition& d) {
  const auto* r = ctx.set.definition_record(d.name);
  return r ? ctx.set.where(r->source) : std::string();
}

std::string shape_text(const TensorSpec& s) {
  if (!s.shape) return "scalar";
  return fmt::format("[{}]", fmt::join(*s.shape, ", "));
}

// Within each family, for each tensor name, the shapes and dtypes must agree; the minority
// (or, on a tie, every side) is flagged.
void check_family_interfaces(
    Context& ctx, const std::map<std::string, std::vector<const Definition*>>& families) {
  for (const auto& [family, defs] : families) {
    if (defs.size() < 2) continue;
    std::set<std::string> names;
    for (const auto* d : defs) {
      for (const auto& s : d->inputs) names.insert(s.name);
      for (const auto& s : d->outputs) names.insert(s.name);
    }
    for (const auto& name : names) {
      std::map<std::string, std::vector<const Definition*>> by_shape, by_dtype;
      for (const auto* d : defs) {
        if (const TensorSpec* s = d->tensor(name)) {
          by_shape[shape_text(*s)].push_back(d);
          by_dtype[std::string(dtype_name(s->dtype))].push_back(d);
        }
      }
      auto flag = [&](const std::map<std::string, std::vector<const Definition*>>& groups,
                      const char* what) {
        if (groups.size() < 2) return;
        std::size_t best = 0;
        for (const auto& [_, g] : groups) best = std::max(best, g.size());
        std::size_t at_best = 0;
        for (const auto& [_, g] : groups) at_best += g.size() == best ? 1 : 0;
        for (const auto& [value, g] : groups) {
          if (g.size() == best && at_best == 1) continue;  // the clear majority is not flagged
          std::vector<std::string> others;
          for (const auto& [ov, og] : groups) {
            if (ov != value) others.push_back(fmt::format("{} in {}", ov, og.size()));
          }
          for (const auto* d : g) {
            const bool is_input = d->input(name) != nullptr;
            ctx.result(d->name, Check::kDefinition)
                .add(message(
                    Severity::kWarning,
                    fmt::format("{} '{}' has {} {} here but {} other definition(s) of the family "
                                "{}; a kernel written for one will misread the other",
                                is_input ? "input" : "output", name, what, value,
                                fmt::join(others, ", "), family),
                    file_of(ctx, *d),
                    JsonPath().key(is_input ? "inputs" : "outputs").key(name).str(),
                    "use one convention across the family"));
          }
        }
      };
      flag(by_shape, "shape");
      flag(by_dtype, "dtype");
    }
  }
}

// Numeric constants assigned in reference code (e.g. `EPS = 1e-5`) that are not axis values:
// math the interface does not show. Within a family they should agree.
void check_family_constants(Context& ctx,
                            const std::map<std::string, std::vector<const Definition*>>& families) {
  for (const auto& [family, defs] : families) {
    if (defs.size() < 2) continue;
    // constant name -> value -> definitions
    std::map<std::string, std::map<double, std::vector<std::pair<const Definition*, std::string>>>>
        consts;
    for (const auto* d : defs) {
      std::set<std::int64_t> axis_values;
      for (const auto& a : d->axes) {
        if (a.value) axis_values.insert(*a.value);
      }
      std::set<std::string> seen;
      for (const auto& c : reference_constant_assignments(*d)) {
        // Upper-case names are the reference's constants; lower-case ones are local variables.
        if (!std::isupper(static_cast<unsigned char>(c.name[0])) ||
            c.name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
                std::string::npos) {
          continue;
        }
        if (c.value == static_cast<double>(static_cast<std::int64_t>(c.value)) &&
            axis_values.count(static_cast<std::int64_t>(c.value))) {
          continue;  // the value of an axis: visible in the interface
        }
        if (!seen.insert(c.name).second) continue;
        consts[c.name][c.value].emplace_back(d, c.text);
      }
    }
    for (const auto& [cname, values] : consts) {
      if (values.size() < 2) continue;
      std::size_t best = 0, at_best = 0;
      for (const auto& [_, g] : values) best = std::max(best, g.size());
      for (const auto& [_, g] : values) at_best += g.size() == best ? 1 : 0;
      for (const auto& [v, g] : values) {
        if (g.size() == best && at_best == 1) continue;
        std::vector<std::string> others;
        for (const auto& [ov, og] : values) {
          if (ov != v) others.push_back(fmt::format("{} in {}", og.front().second, og.size()));
        }
        for (const auto& [d, text] : g) {
          ctx.result(d->name, Check::kDefinition)
              .add(message(
                  Severity::kWarning,
                  fmt::format(
                      "the reference fixes {} = {} while other definitions of the family {} "
                      "use {}; the interface does not show the difference",
                      cname, text, family, fmt::join(others, ", ")),
                  file_of(ctx, *d), "$.reference",
                  "say it in the description, or make it an input or axis"));
        }
      }
    }
  }
}

// Which low-precision dtypes a name token or quantization tag promises.
std::vector<DType> promised_dtypes(const Definition& d, std::string* source) {
  auto family = [](std::string_view v) -> std::vector<DType> {
    if (v.find("fp4") != std::string_view::npos || v.find("float4") != std::string_view::npos) {
      return {DType::kFloat4E2M1};
    }
    if (v.find("fp8") != std::string_view::npos || v.find("float8") != std::string_view::npos) {
      return {DType::kFloat8E4M3FN, DType::kFloat8E5M2};
    }
    return {};
  };
  for (const auto& q : d.tag_values("quantization:")) {
    if (auto f = family(q); !f.empty()) {
      *source = "tag quantization:" + q;
      return f;
    }
  }
  std::size_t start = 0;
  while (start <= d.name.size()) {
    const std::size_t end = std::min(d.name.find('_', start), d.name.size());
    const std::string token = d.name.substr(start, end - start);
    if (token == "fp4" || token == "fp8") {
      *source = "name token '" + token + "'";
      return family(token);
    }
    start = end + 1;
  }
  return {};
}

void check_quantization(Context& ctx, const Definition& d) {
  std::string source;
  const auto promised = promised_dtypes(d, &source);
  if (promised.empty()) return;
  for (const auto* list : {&d.inputs, &d.outputs}) {
    for (const auto& s : *list) {
      if (std::find(promised.begin(), promised.end(), s.dtype) != promised.end()) return;
    }
  }
  std::set<std::string> dtypes;
  for (const auto& s : d.inputs) dtypes.insert(std::string(dtype_name(s.dtype)));
  ctx.result(d.name, Check::kDefinition)
      .add(message(
          Severity::kWarning,
          fmt::format(
              "the {} promises {} data, but no input or output has that dtype (inputs are {}): "
              "the kernel is benchmarked without that quantization",
              source, dtype_name(promised.front()), fmt::join(dtypes, ", ")),
          file_of(ctx, d), "$.inputs", "declare the quantized tensors with their real dtype"));
}

void check_tags(Context& ctx, const Definition& d,
                const std::map<std::string, std::size_t>& model_counts) {
  const std::string file = file_of(ctx, d);
  for (std::size_t i = 0; i < d.tags.size(); ++i) {
    const std::string& t = d.tags[i];
    const std::string path = JsonPath().key("tags").index(i).str();
    const auto colon = t.find(':');
    if (colon == std::string::npos) continue;  // a plain label
    const std::string prefix = t.substr(0, colon), value = t.substr(colon + 1);
    bool known = false;
    for (auto k : kKnownTagPrefixes) known = known || k == prefix;
    if (!known) {
      const std::string m = closest_match(prefix, kKnownTagPrefixes);
      ctx.result(d.name, Check::kDefinition)
          .add(message(Severity::kWarning,
                       fmt::format("unknown tag prefix '{}:' in '{}'", prefix, t), file, path,
                       m.empty() ? std::string() : fmt::format("did you mean '{}:{}'?", m, value)));
      continue;
    }
    if (prefix == "tp" || prefix == "ep") {
      const bool digits =
          !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
      if (!digits || value == "0" || value[0] == '0') {
        ctx.result(d.name, Check::kDefinition)
            .add(message(Severity::kWarning, fmt::format("tag '{}' needs a positive integer", t),
                         file, path));
      }
    }
    if (prefix == "model") {
      // A model spelled two ways: "qwen3-235b" and "qwen3-235b-a22b".
      for (const auto& [other, count] : model_counts) {
        if (other.size() > value.size() + 1 && other.compare(0, value.size(), value) == 0 &&
            other[value.size()] == '-') {
          ctx.result(d.name, Check::kDefinition)
              .add(message(
                  Severity::kWarning,
                  fmt::format(
                      "model tag '{}' looks like a shorter spelling of 'model:{}' (used by {} "
                      "definition(s))",
                      t, other, count),
                  file, path, "use one spelling per model so queries by tag find every kernel"));
        }
      }
    }
  }
  const auto eps = d.tag_values("ep:");
  const auto models = d.tag_values("model:");
  if (eps.size() > 1 && models.size() == 1) {
    ctx.result(d.name, Check::kDefinition)
        .add(message(
            Severity::kWarning,
            fmt::format("tags give several expert-parallel sizes (ep:{}) for the one model '{}'; "
                        "a definition's local expert count fixes one EP per model",
                        fmt::join(eps, ", ep:"), models.front()),
            file, "$.tags"));
  }
}

}  // namespace

void check_definitions(Context& ctx) {
  std::map<std::string, std::vector<const Definition*>> families;
  std::map<std::string, std::size_t> model_counts;
  for (const auto& r : ctx.set.definitions()) {
    families[r.value.op_type + "/" + name_family(r.value.name)].push_back(&r.value);
    for (const auto& m : r.value.tag_values("model:")) ++model_counts[m];
  }
  for (const auto& r : ctx.set.definitions()) {
    const Definition& d = r.value;
    Diagnostics diag;
    ReadContext rc{ctx.set.where(r.source), &diag};
    check_definition_reference(d, rc);
    for (const auto& x : diag) ctx.result(d.name, Check::kDefinition).add(from_diagnostic(x));
    check_quantization(ctx, d);
    check_tags(ctx, d, model_counts);
  }
  // Families are compared inside one op_type; the "op_type/" prefix is dropped in messages.
  std::map<std::string, std::vector<const Definition*>> named;
  for (auto& [key, defs] : families) named[key.substr(key.find('/') + 1)] = defs;
  check_family_interfaces(ctx, named);
  check_family_constants(ctx, named);
}

}  // namespace fib::validate::detail

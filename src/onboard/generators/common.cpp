#include "onboard/generators/common.h"

#include <fmt/format.h>

#include <stdexcept>

#include "fib/trace/json_reader.h"

namespace fib::onboard::gen {

Builder::Builder(std::string name, std::string op_type, std::string description) {
  d_.name = std::move(name);
  d_.op_type = std::move(op_type);
  d_.description = std::move(description);
}

Builder& Builder::tag(std::string t) {
  d_.tags.push_back(std::move(t));
  return *this;
}

Builder& Builder::var(std::string name, std::string description) {
  Axis a;
  a.name = std::move(name);
  a.kind = AxisKind::kVar;
  if (!description.empty()) a.description = std::move(description);
  d_.axes.push_back(std::move(a));
  return *this;
}

Builder& Builder::constant(std::string name, std::int64_t value, std::string description) {
  Axis a;
  a.name = std::move(name);
  a.kind = AxisKind::kConst;
  a.value = value;
  if (!description.empty()) a.description = std::move(description);
  d_.axes.push_back(std::move(a));
  return *this;
}

Builder& Builder::input(std::string name, std::vector<std::string> shape, DType dtype,
                        std::string description, bool optional) {
  TensorSpec s;
  s.name = std::move(name);
  s.shape = std::move(shape);
  s.dtype = dtype;
  if (!description.empty()) s.description = std::move(description);
  if (optional) s.optional = true;
  d_.inputs.push_back(std::move(s));
  return *this;
}

Builder& Builder::scalar(std::string name, DType dtype, std::string description) {
  TensorSpec s;
  s.name = std::move(name);
  s.dtype = dtype;
  if (!description.empty()) s.description = std::move(description);
  d_.inputs.push_back(std::move(s));
  return *this;
}

Builder& Builder::output(std::string name, std::vector<std::string> shape, DType dtype,
                         std::string description) {
  TensorSpec s;
  s.name = std::move(name);
  s.shape = std::move(shape);
  s.dtype = dtype;
  if (!description.empty()) s.description = std::move(description);
  d_.outputs.push_back(std::move(s));
  return *this;
}

Builder& Builder::constraint(std::string c) {
  d_.constraints.push_back(std::move(c));
  return *this;
}

Builder& Builder::reference(std::string source) {
  d_.reference = std::move(source);
  return *this;
}

Definition Builder::build() {
  Diagnostics diag;
  const ReadContext ctx{"generated:" + d_.name, &diag};
  auto parsed = definition_from_json(to_json(d_), ctx);
  if (parsed) check_definition_reference(*parsed, ctx);
  if (!parsed || diag.has_errors()) {
    throw std::logic_error(
        fmt::format("generator produced an invalid definition {}:\n{}", d_.name, diag.to_string()));
  }
  return std::move(*parsed);
}

std::string fill(std::string_view tmpl,
                 std::initializer_list<std::pair<std::string_view, std::string>> values) {
  std::string out(tmpl);
  for (const auto& [key, value] : values) {
    const std::string token = fmt::format("@{}@", key);
    std::size_t pos = out.find(token);
    if (pos == std::string::npos)
      throw std::logic_error(fmt::format("template has no placeholder {}", token));
    while (pos != std::string::npos) {
      out.replace(pos, token.size(), value);
      pos = out.find(token, pos + value.size());
    }
  }
  // A leftover @NAME@ (uppercase placeholder) means the caller forgot a value.
  for (std::size_t pos = out.find('@'); pos != std::string::npos; pos = out.find('@', pos + 1)) {
    std::size_t end = pos + 1;
    while (end < out.size() && ((out[end] >= 'A' && out[end] <= 'Z') || out[end] == '_' ||
                                (out[end] >= '0' && out[end] <= '9'))) {
      ++end;
    }
    if (end > pos + 1 && end < out.size() && out[end] == '@') {
      throw std::logic_error(
          fmt::format("template placeholder {} has no value", out.substr(pos, end - pos + 1)));
    }
  }
  return out;
}

std::string py_float(double x) {
  std::string s = fmt::format("{}", x);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string model_tag(const GenContext& ctx) { return "model:" + ctx.model_slug; }

std::string provenance(const GenContext& ctx, std::string_view detail) {
  if (detail.empty())
    return fmt::format("Derived by fib onboard from the {} config.", ctx.display_name);
  return fmt::format("Derived by fib onboard from the {} config ({}).", ctx.display_name, detail);
}

std::string split_note(std::int64_t full, int tp, std::int64_t per_rank) {
  if (tp <= 1) return {};
  return fmt::format(" ({}/{}={})", full, tp, per_rank);
}

}  // namespace fib::onboard::gen

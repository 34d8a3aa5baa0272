// Reading a level-10 call folder (FlashInfer's api_logging: metadata.jsonl, whose last line is the
// call's most complete record, and inputs.safetensors or inputs.pt keyed "arg_<i>" and
// "kwarg_<name>", a tuple's elements "<key>__<i>").
#include "call_dump.h"

#include <fmt/format.h>

#include <charconv>

#include "fib/tensor/safetensors.h"
#include "fib/trace/json_reader.h"

namespace fib::import {
namespace {

namespace fs = std::filesystem;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// The signature's parameters, split at the commas outside brackets and quotes.
std::vector<std::string_view> split_parameters(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  char quote = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (start < s.size()) parts.push_back(trim(s.substr(start)));
  return parts;
}

std::optional<Json> literal(std::string_view text) {
  if (text == "True") return Json(true);
  if (text == "False") return Json(false);
  Diagnostics ignored;
  std::optional<Json> j = parse_json(text, "", ignored);
  if (j && j->is_number()) return j;
  return std::nullopt;
}

std::optional<Json> last_record(const fs::path& file, const std::string& folder,
                                Diagnostics& diag) {
  const std::optional<std::string> text = read_text_file(file.string(), diag);
  if (!text) return std::nullopt;
  std::optional<Json> last;
  std::size_t line_no = 0, start = 0;
  while (start < text->size()) {
    const std::size_t end = std::min(text->find('\n', start), text->size());
    const std::string_view line = trim(std::string_view(*text).substr(start, end - start));
    ++line_no;
    start = end + 1;
    if (line.empty()) continue;
    last = parse_json(line, fmt::format("{}/metadata.jsonl:{}", folder, line_no), diag);
    if (!last) return std::nullopt;
  }
  if (!last) diag.error(folder + "/metadata.jsonl", "", "holds no record");
  return last;
}

// The name a dumped tensor key stands for: "arg_2" -> the third parameter, "kwarg_x" -> "x",
// "arg_1__0" -> "<second parameter>__0".
std::optional<std::string> parameter_of(std::string_view key,
                                        const std::vector<Parameter>& params) {
  const std::size_t nested = key.find("__");
  const std::string_view head = key.substr(0, nested);
  const std::string tail = nested == std::string_view::npos ? "" : std::string(key.substr(nested));
  if (head.starts_with("kwarg_")) return std::string(head.substr(6)) + tail;
  if (!head.starts_with("arg_")) return std::nullopt;
  std::size_t i = 0;
  const std::string_view digits = head.substr(4);
  const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
  if (ec != std::errc() || p != digits.data() + digits.size() || i >= params.size())
    return std::nullopt;
  return params[i].name + tail;
}

void read_scalars(const Json& input_metadata, const std::vector<Parameter>& params, Call& call) {
  for (const Parameter& p : params)
    if (p.default_value) call.scalars[p.name] = *p.default_value;
  if (!input_metadata.is_object()) return;
  for (const auto& [key, value] : input_metadata.items()) {
    if (!value.is_number() && !value.is_boolean()) continue;
    if (auto name = parameter_of(key, params)) call.scalars[*name] = value;
  }
}

bool read_tensors(const fs::path& folder, const std::vector<Parameter>& params,
                  const std::vector<std::string>& keys_in_call_order,
                  const CallReadOptions& options, Call& call, Diagnostics& diag) {
  fs::path file = folder / "inputs.safetensors";
  if (!fs::exists(file)) {
    if (!fs::exists(folder / "inputs.pt")) {
      diag.error(call.folder, "", "no inputs.safetensors or inputs.pt",
                 "a call that crashed before its inputs were saved cannot be imported");
      return false;
    }
    file = options.converted / (call.folder + ".safetensors");
    if (!fs::exists(file)) {
      Diagnostics ignored;
      const std::string why =
          read_text_file((options.converted / (call.folder + ".error")).string(), ignored)
              .value_or("the .pt reader wrote nothing");
      diag.error(call.folder + "/inputs.pt", "", why.substr(0, why.find('\n')));
      return false;
    }
  }
  try {
    const SafetensorsFile st = SafetensorsFile::open(file);
    for (const std::string& key : st.keys())
      if (auto name = parameter_of(key, params)) call.tensors[*name] = st.read(key);
    for (const std::string& key : keys_in_call_order)
      if (auto name = parameter_of(key, params);
          name && call.tensors.contains(*name) && name->find("__") == std::string::npos)
        call.tensor_order.push_back(*name);
  } catch (const Error& e) {
    for (Diagnostic d : e.diagnostics()) {
      d.file = call.folder + (file.parent_path() == folder ? "/inputs.safetensors" : "/inputs.pt");
      diag.add(std::move(d));
    }
    return false;
  }
  return true;
}

}  // namespace

std::vector<Parameter> parse_signature(std::string_view signature) {
  signature = trim(signature);
  const std::size_t close = signature.rfind(')');
  if (!signature.starts_with('(') || close == std::string_view::npos) return {};
  std::vector<Parameter> out;
  for (std::string_view part : split_parameters(signature.substr(1, close - 1))) {
    if (part == "*" || part == "/" || part.starts_with("**")) continue;
    if (part.starts_with('*')) part.remove_prefix(1);
    const std::size_t eq = part.find('=');
    const std::string_view head = trim(part.substr(0, eq));
    Parameter p;
    p.name = std::string(trim(head.substr(0, head.find(':'))));
    if (eq != std::string_view::npos) p.default_value = literal(trim(part.substr(eq + 1)));
    out.push_back(std::move(p));
  }
  return out;
}

std::optional<Call> read_call(const fs::path& folder, const CallReadOptions& options,
                              Diagnostics& diag) {
  Call call;
  call.folder = folder.filename().string();
  const std::optional<Json> record = last_record(folder / "metadata.jsonl", call.folder, diag);
  if (!record) return std::nullopt;
  const ReadContext ctx{call.folder + "/metadata.jsonl", &diag};
  const auto name = record->find("function_name");
  if (name == record->end() || !name->is_string()) {
    ctx.error(JsonPath().key("function_name"), "missing or not a string",
              "expected the API's name, e.g. \"rmsnorm\"");
    return std::nullopt;
  }
  call.function_name = name->get<std::string>();
  if (auto id = record->find("self_id"); id != record->end() && id->is_number_integer())
    call.self_id = id->get<std::int64_t>();
  call.process_id = record->value("process_id", std::int64_t{0});
  const std::vector<Parameter> params =
      parse_signature(record->value("function_signature", std::string()));
  static const Json kNone = Json::object();
  const auto metadata = record->find("input_metadata");
  read_scalars(metadata == record->end() ? kNone : *metadata, params, call);
  std::vector<std::string> keys;
  if (const auto info = record->find("tensor_info"); info != record->end() && info->is_object())
    if (const auto k = info->find("input_tensor_keys"); k != info->end() && k->is_array())
      for (const Json& key : *k)
        if (key.is_string()) keys.push_back(key.get<std::string>());
  if (!read_tensors(folder, params, keys, options, call, diag)) return std::nullopt;
  return call;
}

}  // namespace fib::import

// --tags: the workflow tags (model, tp, ep) FlashInfer's dumper does not emit.
#include <fmt/format.h>

#include <charconv>

#include "fib/base/diagnostics.h"
#include "fib/import/import.h"

namespace fib::import {
namespace {

bool positive_integer(std::string_view s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && v > 0;
}

void check_tag(std::string_view tag) {
  const std::size_t colon = tag.find(':');
  const std::string_view key = tag.substr(0, colon);
  const std::string_view value = colon == std::string_view::npos ? "" : tag.substr(colon + 1);
  if (colon == std::string_view::npos || value.empty())
    throw Error("--tags", fmt::format("'{}' is not key:value", tag), "e.g. model:llama-3.1-8b");
  if (key != "model" && key != "tp" && key != "ep")
    throw Error("--tags", fmt::format("'{}': unknown key '{}'", tag, key),
                "the keys are model, tp and ep");
  if (key != "model" && !positive_integer(value))
    throw Error("--tags", fmt::format("'{}': {} takes a positive integer", tag, key));
}

}  // namespace

std::vector<std::string> parse_workflow_tags(std::string_view text) {
  std::vector<std::string> tags;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view tag = text.substr(0, comma);
    check_tag(tag);
    tags.emplace_back(tag);
    text = comma == std::string_view::npos ? "" : text.substr(comma + 1);
  }
  return tags;
}

}  // namespace fib::import

#include "report/text_table.h"

#include <fmt/format.h>
#include <algorithm>

namespace fib::report::detail {

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> right_aligned)
    : header_(std::move(header)), right_(std::move(right_aligned)) {
  right_.resize(header_.size(), false);
}

void TextTable::add(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
}

std::string TextTable::render(std::string_view indent) const {
  std::vector<std::size_t> width(header_.size());
  for (std::size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text(indent);
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) text += "  ";
      const std::size_t pad = width[c] - cells[c].size();
      if (right_[c]) text.append(pad, ' ');
      text += cells[c];
      if (!right_[c] && c + 1 < cells.size()) text.append(pad, ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text;
    out += '\n';
  };
  line(header_);
  for (const auto& row : rows_) line(row);
  return out;
}

std::string format_ratio(double r) { return fmt::format("{:.2f}x", r); }
std::string format_percent(double p) { return fmt::format("{:.2f}%", p); }
std::string format_fraction_percent(double f) { return fmt::format("{:.2f}%", 100.0 * f); }
std::string format_ms(double ms) { return fmt::format("{:.4g}", ms); }
std::string format_p(double p) { return fmt::format("{}", p); }

}  // namespace fib::report::detail

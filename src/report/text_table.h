// Plain-text tables and number formats shared by the report renderers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fib::report::detail {

// Columns padded to their widest cell; numeric columns are right-aligned so digits line up.
class TextTable {
 public:
  TextTable(std::vector<std::string> header, std::vector<bool> right_aligned);
  void add(std::vector<std::string> row);
  bool empty() const { return rows_.empty(); }
  std::string render(std::string_view indent = "  ") const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

std::string format_ratio(double r);             // "1.23x"
std::string format_percent(double p);           // "66.67%" from 66.666...
std::string format_fraction_percent(double f);  // "50.00%" from 0.5
std::string format_ms(double ms);               // "0.0123"
std::string format_p(double p);                 // shortest form: "0", "0.5", "1.5"

}  // namespace fib::report::detail

// The generators' Python templates (src/onboard/generators/templates/, compiled in): each
// renders, with representative values for its placeholders, into Python that parses and defines
// run(); each complete fragment parses on its own, and every fragment is some template's value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "onboard/generators/templates.h"
#include "support/temp_dir.h"

namespace fib::onboard::gen {
namespace {

using Values = std::vector<std::string>;

// Values of each placeholder: numbers as the generators print them, code as the generators pass
// it (template fragments or short snippets). Rendering i takes every placeholder's value i (its
// last where it has fewer), so the values of one index belong together (a sink parameter with
// the sink softmax, a paged gather with the last-page length, a sampling kind's helpers, params
// and body).
std::map<std::string, Values> values() {
  using namespace templates;
  return {
      {"ACT", {"F.silu(gate)", "F.gelu(gate)", "F.gelu(gate, approximate=\"tanh\")"}},
      {"ALPHA", {"1.702"}},
      {"ATTEND", {std::string(attend_causal)}},
      {"BIAS_PARAM", {"", ", routing_bias"}},
      {"BODY",
       {std::string(sampling_body_top_k), std::string(sampling_body_top_p),
        std::string(sampling_body_top_k_top_p), std::string(sampling_body_min_p)}},
      {"BATCH", {"16"}},
      {"C", {"512"}},
      {"CKV", {"512"}},
      {"CORE", {std::string(gdn_core)}},
      {"D", {"128"}},
      {"DS", {"128"}},
      {"E", {"32"}},
      {"EL", {"32"}},
      {"EPS", {"1e-06"}},
      {"G", {"128"}},
      {"GATHER", {std::string(mla_paged_gather_ps1), std::string(mla_paged_gather)}},
      {"H", {"32"}},
      {"HD", {"64"}},
      {"HELPERS",
       {std::string(sampling_top_k), std::string(sampling_top_p),
        std::string(sampling_top_k) + "\n\n" + std::string(sampling_top_p),
        std::string(sampling_min_p)}},
      {"HQ", {"16"}},
      {"HS", {"7168"}},
      {"HV", {"32"}},
      {"ID", {"128"}},
      {"IH", {"64"}},
      {"IS", {"2048"}},
      {"K", {"8"}},
      {"KG", {"4"}},
      {"KPE", {"64"}},
      {"KV", {"8"}},
      {"LAST", {"", "kv_last_page_len, "}},
      {"LAST_OF_B", {"0", "int(kv_last_page_len[b].item())"}},
      {"LIMIT", {"7.0"}},
      {"N", {"4096"}},
      {"NG", {"8"}},
      {"NH", {"128"}},
      {"ON_INPUT", {"False", "True"}},
      {"P", {"16"}},
      {"PARAMS", {"probs, top_k", "probs, top_p", "probs, top_k, top_p", "probs, min_p"}},
      {"PS", {"1", "64"}},
      {"QK", {"192"}},
      {"R", {"64"}},
      {"RD", {"64"}},
      {"ROTATE", {std::string(rope_neox), std::string(rope_gptj)}},
      {"ROUTE", {std::string(moe_route_renorm), std::string(moe_route_llama4)}},
      {"SCALE", {"0.08838834764831845"}},
      {"SINKS", {"", "sinks, "}},
      {"SINK_ARG", {"", ", sinks"}},
      {"SOFTMAX",
       {std::string(gqa_paged_decode_softmax), std::string(gqa_paged_decode_softmax_sink)}},
      {"TOPK", {"2048"}},
      {"V", {"128256"}},
      {"VO", {"128"}},
      // The per-tensor FP8 MoE spells its bias parameter with the commas around it.
      {"moe_align.py.in:BS", {"64"}},
      {"moe_routing_topk.py.in:SIGMOID", {"0", "1"}},
      {"moe_routing_topk.py.in:RENORMALIZE", {"1", "0"}},
      {"sampling_renorm.py.in:PARAM", {"top_k", "top_p"}},
      {"sampling_renorm.py.in:FILTER",
       {"_top_k(probs[i], int(top_k[i].item()))", "_top_p(probs[i], float(top_p[i].item()))"}},
      {"comm.py.in:BODY",
       {std::string(comm_all_reduce), std::string(comm_all_gather),
        std::string(comm_reduce_scatter), std::string(comm_all_to_all)}},
      {"moe_fp8_per_tensor.py.in:BIAS_PARAM", {",", ",\n    routing_bias,"}},
  };
}

std::set<std::string> placeholders(std::string_view source) {
  std::set<std::string> out;
  static const std::regex key("@([A-Z][A-Z0-9_]*)@");
  const std::string text(source);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), key); it != std::sregex_iterator();
       ++it)
    out.insert((*it)[1]);
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

TEST(GeneratorTemplates, EachRendersToPythonThatParses) {
  const auto table = values();
  std::set<std::string> used;  // the sources some placeholder value is made of
  for (const auto& [key, alternatives] : table)
    for (const auto& v : alternatives) used.insert(v);

  // name -> Python source to check; whether it must define run().
  Json checks = Json::object();
  std::size_t hosts = 0;
  for (const auto& t : templates::kAll) {
    SCOPED_TRACE(std::string(t.name));
    const std::set<std::string> keys = placeholders(t.source);
    EXPECT_EQ(!keys.empty(), ends_with(t.name, ".py.in"))
        << "placeholders belong in a .py.in, and a .py.in has some";
    if (keys.empty()) {
      // A fragment: some template takes it as a placeholder's value.
      EXPECT_TRUE(used.count(std::string(t.source)))
          << "a fragment no placeholder value of this test uses: add it";
      if (ends_with(t.name, ".py"))
        checks[std::string(t.name)] = {{"source", std::string(t.source)}};
      continue;
    }
    ++hosts;
    std::size_t renderings = 1;
    for (const auto& k : keys) {
      const auto it = table.count(std::string(t.name) + ":" + k)
                          ? table.find(std::string(t.name) + ":" + k)
                          : table.find(k);
      ASSERT_NE(it, table.end()) << "no representative value for @" << k << "@: add one";
      renderings = std::max(renderings, it->second.size());
    }
    for (std::size_t i = 0; i < renderings; ++i) {
      std::string out(t.source);
      for (const auto& k : keys) {
        const auto it = table.count(std::string(t.name) + ":" + k)
                            ? table.find(std::string(t.name) + ":" + k)
                            : table.find(k);
        const Values& alternatives = it->second;
        out = replace_all(out, "@" + k + "@", alternatives[std::min(i, alternatives.size() - 1)]);
      }
      EXPECT_TRUE(placeholders(out).empty()) << "left over after rendering " << i;
      checks[std::string(t.name) + " #" + std::to_string(i)] = {{"source", out}, {"run", true}};
    }
  }
  EXPECT_GE(hosts, 25u);  // the .py.in files: every op family has at least one

  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "SKIPPED: python3 is not available to parse the rendered templates";
  }
  ::fib::testing::TempDir dir;
  dir.write("checks.json", dump_json_pretty(checks));
  dir.write(
      "check.py",
      "import ast, json, sys\n"
      "bad = []\n"
      "for name, c in json.load(open(sys.argv[1])).items():\n"
      "    try:\n"
      "        tree = ast.parse(c['source'])\n"
      "    except SyntaxError as e:\n"
      "        bad.append(f'{name}: {e}')\n"
      "        continue\n"
      "    runs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == 'run']\n"
      "    if c.get('run') and not runs:\n"
      "        bad.append(f'{name}: no top-level run')\n"
      "print('\\n'.join(bad))\n"
      "sys.exit(1 if bad else 0)\n");
  const std::string cmd = "python3 " + (dir.path() / "check.py").string() + " " +
                          (dir.path() / "checks.json").string() + " > " +
                          (dir.path() / "out.txt").string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << dir.read("out.txt");
}

}  // namespace
}  // namespace fib::onboard::gen

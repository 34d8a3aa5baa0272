// End to end on the CPU: `fib run` (run_benchmark) of onboarding's definitions of the elementwise
// op types (activation, embedding, cascade_merge, concat_mla, hadamard) and of page_append (a
// copy into a paged cache) at small sizes, on synthesized workloads, each with a correct and a
// wrong Python solution; judged once against fib's native references and once against the
// definitions' own PyTorch references, with the same verdicts. Skipped visibly where no python3
// imports torch.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "fib/bench/builder/python_runtime.h"
#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"
#include "fib/onboard/generators.h"
#include "fib/tensor/workload_synth.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

// A definition with the body of a correct and of a wrong destination-passing solution.
struct OpCase {
  onboard::KernelSpec kernel;
  std::string right;
  std::string wrong;
};

// Built by push_back: GCC 12 needs tens of GB to compile a braced list of aggregates holding the
// KernelSpec variant.
std::vector<OpCase> make_cases() {
  std::vector<OpCase> list;
  list.push_back({onboard::ActivationKernel{onboard::ActivationKind::kSilu, 64, "", 0},
                  "def run(input, output):\n"
                  "    d = input.shape[1] // 2\n"
                  "    x = input.float()\n"
                  "    output.copy_(F.silu(x[:, :d]) * x[:, d:])\n",
                  // The halves swapped: silu applied to the up projection.
                  "def run(input, output):\n"
                  "    d = input.shape[1] // 2\n"
                  "    x = input.float()\n"
                  "    output.copy_(F.silu(x[:, d:]) * x[:, :d])\n"});
  list.push_back({onboard::EmbeddingKernel{500, 64},
                  "def run(input_ids, weight, output):\n"
                  "    output.copy_(weight[input_ids])\n",
                  // Off by one row.
                  "def run(input_ids, weight, output):\n"
                  "    output.copy_(weight[(input_ids + 1) % weight.shape[0]])\n"});
  list.push_back(
      {onboard::MergeStateKernel{4, 32, 1},
       "def run(v_a, s_a, v_b, s_b, v_merged, s_merged):\n"
       "    m = torch.maximum(s_a, s_b)\n"
       "    wa, wb = torch.exp2(s_a - m), torch.exp2(s_b - m)\n"
       "    v = (v_a.float() * wa[..., None] + v_b.float() * wb[..., None]) / (wa + wb)[..., "
       "None]\n"
       "    v_merged.copy_(v)\n"
       "    s_merged.copy_(m + torch.log2(wa + wb))\n",
       // The LSEs taken as natural logs.
       "def run(v_a, s_a, v_b, s_b, v_merged, s_merged):\n"
       "    m = torch.maximum(s_a, s_b)\n"
       "    wa, wb = torch.exp(s_a - m), torch.exp(s_b - m)\n"
       "    v = (v_a.float() * wa[..., None] + v_b.float() * wb[..., None]) / (wa + wb)[..., "
       "None]\n"
       "    v_merged.copy_(v)\n"
       "    s_merged.copy_(m + torch.log(wa + wb))\n"});
  list.push_back({onboard::ConcatMlaQKernel{4, 64, 16, 1},
                  "def run(q_nope, q_pe, q):\n"
                  "    q.copy_(torch.cat([q_nope, q_pe], dim=-1))\n",
                  // The rotary part first.
                  "def run(q_nope, q_pe, q):\n"
                  "    q.copy_(torch.cat([q_pe, q_nope], dim=-1))\n"});
  list.push_back({onboard::HadamardKernel{64},
                  "def run(x, output):\n"
                  "    d = x.shape[1]\n"
                  "    h = torch.ones(1, 1)\n"
                  "    while h.shape[0] < d:\n"
                  "        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)\n"
                  "    output.copy_((x.float() @ h) * d ** -0.5)\n",
                  // The scale forgotten.
                  "def run(x, output):\n"
                  "    d = x.shape[1]\n"
                  "    h = torch.ones(1, 1)\n"
                  "    while h.shape[0] < d:\n"
                  "        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)\n"
                  "    output.copy_(x.float() @ h)\n"});
  const std::string append_head =
      "def run(append_key, append_value, batch_indices, positions, k_cache, v_cache, "
      "kv_indices, kv_indptr, kv_last_page_len, new_k_cache, new_v_cache):\n"
      "    ps = k_cache.shape[1]\n"
      "    b, p = batch_indices.long(), positions.long()\n"
      "    page = kv_indices.long()[kv_indptr.long()[b] + p // ps]\n"
      "    new_k_cache.copy_(k_cache)\n"
      "    new_v_cache.copy_(v_cache)\n";
  list.push_back({onboard::PageAppendKernel{false, 2, 16, 0, 0, 4, 1},
                  append_head + "    new_k_cache[page, p % ps] = append_key\n"
                                "    new_v_cache[page, p % ps] = append_value\n",
                  // The next slot of the page written.
                  append_head + "    new_k_cache[page, (p + 1) % ps] = append_key\n"
                                "    new_v_cache[page, (p + 1) % ps] = append_value\n"});
  return list;
}

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> list = make_cases();
  return list;
}

class ElementwiseRun : public ::testing::Test {
 protected:
  void SetUp() override {
    const onboard::GenContext ctx{"test", "Test"};
    for (const auto& c : cases()) {
      const Definition def = onboard::generate_definition(c.kernel, ctx);
      write_definition(root(), def);
      names_.push_back(def.name);
      write_workloads(def);
      add_solution(def, "right", c.right);
      add_solution(def, "wrong", c.wrong);
    }
  }

  fs::path root() const { return tmp_.path() / "dataset"; }

  // One synthesized workload (the cost of the test is the Python workers' start, one a solution
  // and reference, not the calls).
  void write_workloads(const Definition& def) const {
    SynthOptions so;
    so.count = 1;
    so.seed = 3;
    so.max_tokens = 24;
    const fs::path dir = root() / "workloads" / def.op_type;
    fs::create_directories(dir);
    std::ofstream out(dir / (def.name + ".jsonl"));
    for (const Workload& w : synthesize_workloads(def, so)) {
      Json line = Json::object();
      line["definition"] = def.name;
      line["solution"] = nullptr;
      line["workload"] = to_json(w);
      line["evaluation"] = nullptr;
      out << line.dump() << "\n";
    }
  }

  void add_solution(const Definition& def, const std::string& kind, const std::string& body) {
    Solution s;
    s.name = def.name + "_" + kind;
    s.definition = def.name;
    s.author = "elementwise-tests";
    s.spec.language = "python";
    s.spec.target_hardware = {"cpu"};
    s.spec.entry_point = "main.py::run";
    s.sources.push_back(
        SourceFile{"main.py", "import torch\nimport torch.nn.functional as F\n\n\n" + body, {}});
    write_solution(root(), s, def.op_type);
  }

  RunResult run(ReferenceChoice reference) {
    RunOptions o;
    o.dataset = root();
    o.worker_executable = FIB_EXE;
    o.abi_include_dir = kSource / "include";
    o.build_cache = tmp_.path() / "cache";
    o.python_bridge_dir = kSource / "python" / "fib_bridge";
    o.reference_cache = ReferenceCacheChoice::off();
    o.reference = reference;
    o.seed = 5;
    o.timeout_seconds = 60;
    o.cli.warmup_runs = 0;
    o.cli.iterations = 1;
    o.cli.num_trials = 1;
    o.max_trial_seconds = 0.05;
    o.definitions = names_;
    return run_benchmark(o);
  }

  TempDir tmp_;
  std::vector<std::string> names_;
};

// Solution -> its statuses; and the reference each trace names.
std::map<std::string, std::vector<std::string>> statuses(const RunResult& r,
                                                         std::set<std::string>* references) {
  std::map<std::string, std::vector<std::string>> m;
  for (const Trace& t : r.traces) {
    m[*t.solution].push_back(std::string(status_name(t.evaluation->status)));
    references->insert(t.evaluation->environment.extra.at("reference").get<std::string>());
  }
  return m;
}

TEST_F(ElementwiseRun, NativeAndPyTorchReferencesPassTheRightSolutionsAndCatchTheWrongOnes) {
  std::string why;
  if (!find_python("", PythonUse::kRuntime, &why)) GTEST_SKIP() << "no Python runtime: " << why;
  std::set<std::string> native_refs, python_refs;
  const auto native = statuses(run(ReferenceChoice::kNative), &native_refs);
  const auto python = statuses(run(ReferenceChoice::kPython), &python_refs);
  EXPECT_EQ(native_refs,
            (std::set<std::string>{"native:activation", "native:embedding", "native:cascade_merge",
                                   "native:concat_mla", "native:hadamard", "native:page_append"}));
  EXPECT_EQ(python_refs, std::set<std::string>{"python"});
  const std::vector<std::string> passed = {"PASSED"}, wrong = {"INCORRECT_NUMERICAL"};
  for (const auto& name : names_) {
    EXPECT_EQ(native.at(name + "_right"), passed) << name;
    EXPECT_EQ(native.at(name + "_wrong"), wrong) << name;
  }
  EXPECT_EQ(native, python);
}

}  // namespace
}  // namespace fib::bench

// A worker evaluation's box (src/bench/launch/box.h): what is staged in, the paths the worker is
// handed, and the outputs taken out; unsandboxed, every path stays the orchestrator's.
#include <gtest/gtest.h>

#include <filesystem>

#include "fib/base/diagnostics.h"
#include "fib/bench/launch/box.h"
#include "support/temp_dir.h"

namespace fib::bench::detail {
namespace {

namespace fs = std::filesystem;
using fib::testing::TempDir;

// A box as Scratch::make_box leaves it: the folder and its out/.
fs::path make_box(const TempDir& tmp) {
  const fs::path box = tmp.path() / "box";
  fs::create_directories(box / "out");
  return box;
}

TEST(SandboxBox, StagesInputsAndLibraryAndClearsTheRest) {
  TempDir tmp;
  const fs::path inputs = tmp.write("workload-1/inputs.safetensors", "sets");
  const fs::path library = tmp.write("build/abc/solution.so", "elf");
  const fs::path box_dir = make_box(tmp);
  tmp.write("box/left-over", "x");
  tmp.write("box/out/old-output", "y");
  Box box(box_dir);
  const Box::Staged st = box.stage(inputs.string(), Box::Library{library, "abc", false});
  EXPECT_EQ(st.inputs, (box_dir / "inputs-workload-1-inputs.safetensors").string());
  EXPECT_EQ(st.library, (box_dir / "lib-abc" / "solution.so").string());
  EXPECT_EQ(TempDir::read_file(st.inputs), "sets");
  EXPECT_EQ(TempDir::read_file(st.library), "elf");
  EXPECT_FALSE(fs::exists(box_dir / "left-over"));
  EXPECT_FALSE(fs::exists(box_dir / "out" / "old-output"));
  EXPECT_TRUE(fs::is_directory(box_dir / "out"));

  // The next evaluation keeps what it stages again and loses the rest.
  const fs::path other = tmp.write("build/def/solution.so", "elf2");
  const Box::Staged next = Box(box_dir).stage(inputs.string(), Box::Library{other, "def", false});
  EXPECT_EQ(next.inputs, st.inputs);
  EXPECT_TRUE(fs::exists(next.library));
  EXPECT_FALSE(fs::exists(box_dir / "lib-abc"));
}

TEST(SandboxBox, StagesAPythonBuildEntryWhole) {
  TempDir tmp;
  const fs::path inputs = tmp.write("w/inputs.safetensors", "sets");
  const fs::path entry = tmp.write("build/py/main.py", "import helper");
  tmp.write("build/py/pkg/helper.py", "x = 1");
  const fs::path box_dir = make_box(tmp);
  const Box::Staged st = Box(box_dir).stage(inputs.string(), Box::Library{entry, "py", true});
  EXPECT_EQ(st.library, (box_dir / "lib-py" / "main.py").string());
  EXPECT_EQ(TempDir::read_file(box_dir / "lib-py" / "pkg" / "helper.py"), "x = 1");
}

TEST(SandboxBox, OutputsAreWrittenInTheBoxAndTakenOut) {
  TempDir tmp;
  const fs::path inputs = tmp.write("w/inputs.safetensors", "sets");
  const fs::path box_dir = make_box(tmp);
  Box box(box_dir);
  box.stage(inputs.string());
  protocol::Schedule schedule;
  schedule.trials.resize(2);
  schedule.trials[0].check_output = (tmp.path() / "w" / "ref-trial0.safetensors").string();
  const protocol::Schedule in_box = box.outputs_in_box(schedule);
  EXPECT_EQ(in_box.trials[0].check_output, (box_dir / "out" / "ref-trial0.safetensors").string());
  EXPECT_TRUE(in_box.trials[1].check_output.empty());
  const std::string draws = box.output((tmp.path() / "w" / "draws.safetensors").string());
  EXPECT_EQ(draws, (box_dir / "out" / "draws.safetensors").string());
  // Two outputs of one evaluation cannot share a file in the box.
  EXPECT_THROW(box.output((tmp.path() / "elsewhere" / "draws.safetensors").string()), Error);

  // Outputs the worker names itself go to the box's out/ too, each named for take_outputs.
  EXPECT_EQ(box.outputs_folder((tmp.path() / "w").string()), (box_dir / "out").string());
  box.output((tmp.path() / "w" / "reference-set3.safetensors").string());

  tmp.write("box/out/ref-trial0.safetensors", "outputs");
  tmp.write("box/out/reference-set3.safetensors", "kept");
  box.take_outputs();  // draws.safetensors was not written: left out
  EXPECT_EQ(tmp.read("w/ref-trial0.safetensors"), "outputs");
  EXPECT_EQ(tmp.read("w/reference-set3.safetensors"), "kept");
  EXPECT_FALSE(fs::exists(box_dir / "out" / "ref-trial0.safetensors"));
  EXPECT_FALSE(fs::exists(tmp.path() / "w" / "draws.safetensors"));
}

TEST(SandboxBox, UnsandboxedHandsOutTheOrchestratorsPaths) {
  TempDir tmp;
  const fs::path inputs = tmp.write("w/inputs.safetensors", "sets");
  Box box;
  EXPECT_FALSE(box.sandboxed());
  const Box::Staged st = box.stage(inputs.string(), Box::Library{"/lib/x.so", "k", false});
  EXPECT_EQ(st.inputs, inputs.string());
  EXPECT_EQ(st.library, "/lib/x.so");
  EXPECT_EQ(box.output("/w/out.safetensors"), "/w/out.safetensors");
  EXPECT_EQ(box.outputs_folder("/w"), "/w");
  box.take_outputs();
  EXPECT_TRUE(fs::exists(inputs));
}

}  // namespace
}  // namespace fib::bench::detail

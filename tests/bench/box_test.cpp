// A worker evaluation's box (src/bench/launch/box.h): what is staged in, the paths the worker is
// handed (under the neutral /box the sandbox binds it at), and the outputs taken out, held to
// regular files with one link; unsandboxed, every path stays the orchestrator's.
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
  // The worker's paths name neither the scratch folder nor the workload's folder.
  const fs::path staged_inputs = fs::path(st.inputs).filename();
  EXPECT_EQ(fs::path(st.inputs).parent_path(), "/box");
  EXPECT_TRUE(staged_inputs.string().starts_with("inputs-")) << st.inputs;
  EXPECT_TRUE(staged_inputs.string().ends_with("-inputs.safetensors")) << st.inputs;
  EXPECT_EQ(st.inputs.find("workload-1"), std::string::npos) << st.inputs;
  EXPECT_EQ(st.library, "/box/lib-abc/solution.so");
  EXPECT_EQ(TempDir::read_file(box_dir / staged_inputs), "sets");
  EXPECT_EQ(TempDir::read_file(box_dir / "lib-abc" / "solution.so"), "elf");
  EXPECT_FALSE(fs::exists(box_dir / "left-over"));
  EXPECT_FALSE(fs::exists(box_dir / "out" / "old-output"));
  EXPECT_TRUE(fs::is_directory(box_dir / "out"));

  // The next evaluation keeps what it stages again and loses the rest.
  const fs::path other = tmp.write("build/def/solution.so", "elf2");
  const Box::Staged next = Box(box_dir).stage(inputs.string(), Box::Library{other, "def", false});
  EXPECT_EQ(next.inputs, st.inputs);
  EXPECT_TRUE(fs::exists(box_dir / "lib-def" / "solution.so"));
  EXPECT_FALSE(fs::exists(box_dir / "lib-abc"));
}

TEST(SandboxBox, StagesAPythonBuildEntryWhole) {
  TempDir tmp;
  const fs::path inputs = tmp.write("w/inputs.safetensors", "sets");
  const fs::path entry = tmp.write("build/py/main.py", "import helper");
  tmp.write("build/py/pkg/helper.py", "x = 1");
  const fs::path box_dir = make_box(tmp);
  const Box::Staged st = Box(box_dir).stage(inputs.string(), Box::Library{entry, "py", true});
  EXPECT_EQ(st.library, "/box/lib-py/main.py");
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
  EXPECT_EQ(in_box.trials[0].check_output, "/box/out/ref-trial0.safetensors");
  EXPECT_TRUE(in_box.trials[1].check_output.empty());
  const std::string draws = box.output((tmp.path() / "w" / "draws.safetensors").string());
  EXPECT_EQ(draws, "/box/out/draws.safetensors");
  // Two outputs of one evaluation cannot share a file in the box.
  EXPECT_THROW(box.output((tmp.path() / "elsewhere" / "draws.safetensors").string()), Error);

  // Outputs the worker names itself go to the box's out/ too, each named for take_outputs.
  EXPECT_EQ(box.outputs_folder((tmp.path() / "w").string()), "/box/out");
  box.output((tmp.path() / "w" / "reference-set3.safetensors").string());

  tmp.write("box/out/ref-trial0.safetensors", "outputs");
  tmp.write("box/out/reference-set3.safetensors", "kept");
  EXPECT_EQ(box.take_outputs(), "");  // draws.safetensors was not written: left out
  EXPECT_EQ(tmp.read("w/ref-trial0.safetensors"), "outputs");
  EXPECT_EQ(tmp.read("w/reference-set3.safetensors"), "kept");
  EXPECT_FALSE(fs::exists(box_dir / "out" / "ref-trial0.safetensors"));
  EXPECT_FALSE(fs::exists(tmp.path() / "w" / "draws.safetensors"));
}

TEST(SandboxBox, OutputsThatAreNotPlainFilesAreRemovedAndNamed) {
  // A link to a file fib reads (the reference's outputs), a dangling link, a hard link and a
  // folder, each where the worker was to write an output: none is taken as an output.
  TempDir tmp;
  const fs::path inputs = tmp.write("w/inputs.safetensors", "sets");
  const fs::path reference = tmp.write("w/reference-set0.safetensors", "the reference");
  const fs::path box_dir = make_box(tmp);
  Box box(box_dir);
  box.stage(inputs.string());
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    box.output((tmp.path() / "w" / (std::string(name) + ".safetensors")).string());
  }
  fs::create_symlink(reference, box_dir / "out" / "a.safetensors");
  fs::create_symlink(tmp.path() / "nowhere", box_dir / "out" / "b.safetensors");
  tmp.write("box/out/c.safetensors", "mine");
  fs::create_hard_link(box_dir / "out" / "c.safetensors", box_dir / "out" / "c-too");
  fs::create_directories(box_dir / "out" / "d.safetensors");
  tmp.write("box/out/e.safetensors", "plain");
  const std::string unsound = box.take_outputs(/*private_copies=*/true);
  EXPECT_NE(unsound.find("a.safetensors is a symbolic link"), std::string::npos) << unsound;
  EXPECT_NE(unsound.find("b.safetensors is a symbolic link"), std::string::npos) << unsound;
  EXPECT_NE(unsound.find("c.safetensors is a file with 2 links"), std::string::npos) << unsound;
  EXPECT_NE(unsound.find("d.safetensors is not a regular file"), std::string::npos) << unsound;
  EXPECT_EQ(unsound.find("e.safetensors"), std::string::npos) << unsound;
  for (const char* name : {"a", "b", "c", "d"}) {
    EXPECT_FALSE(
        fs::exists(fs::symlink_status(tmp.path() / "w" / (std::string(name) + ".safetensors"))))
        << name;
  }
  EXPECT_EQ(tmp.read("w/e.safetensors"), "plain");
  EXPECT_EQ(tmp.read("w/reference-set0.safetensors"), "the reference");
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

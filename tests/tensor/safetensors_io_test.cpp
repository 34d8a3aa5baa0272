// SafetensorsFile and write_safetensors: round trips of every dtype, byte-identical output to
// the format's own writer, reading files that writer made (tests/data/safetensors), errors
// (with their findings and suggestions), and the atomic replacement of an existing file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "fib/tensor/numeric.h"
#include "fib/tensor/safetensors.h"
#include "fib/tensor/tensor.h"
#include "safetensors_bytes.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fib::Error a call throws (its first finding), or a failure.
Diagnostic first_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    if (!e.diagnostics().empty()) return e.diagnostics().items()[0];
    return Diagnostic{Severity::kError, {}, {}, "(an Error without findings)", {}};
  }
  return Diagnostic{Severity::kError, {}, {}, "(no fib::Error thrown)", {}};
}

// Files in `dir` other than `keep` (leftover temporary files).
std::vector<std::string> other_files(const fs::path& dir, const std::string& keep) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename() != keep) out.push_back(e.path().filename().string());
  }
  return out;
}

// A tensor of each dtype with distinct values (odd counts, so float4's padding nibble shows).
std::vector<std::pair<std::string, Tensor>> every_dtype() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (DType d : kAllDTypes) {
    Tensor t(d, {3});
    for (int i = 0; i < 3; ++i) t.set(i, d == DType::kBool ? (i % 2) : (i + 1) * (i == 1 ? -1 : 1));
    out.emplace_back(std::string(dtype_name(d)), t);
  }
  out.emplace_back("scalar", Tensor(DType::kInt64, {}));
  out.back().second.set(0, 1234567);
  out.emplace_back("empty", Tensor(DType::kBFloat16, {0, 4}));
  out.emplace_back("matrix", Tensor(DType::kFloat4E2M1, {3, 3}));
  for (int i = 0; i < 9; ++i) out.back().second.set(i, 0.5 * i);
  return out;
}

TEST(Safetensors, RoundTripEveryDtype) {
  TempDir tmp;
  const fs::path file = tmp.path() / "all.safetensors";
  const auto tensors = every_dtype();
  write_safetensors(file, tensors, {{"format", "pt"}, {"producer", "fib"}});
  EXPECT_TRUE(other_files(tmp.path(), "all.safetensors").empty());

  const SafetensorsFile f = SafetensorsFile::open(file);
  EXPECT_EQ(f.path(), file);
  EXPECT_EQ(f.header().data_offset() % 8, 0u);
  EXPECT_EQ(f.header().metadata, (std::vector<std::pair<std::string, std::string>>{
                                     {"format", "pt"}, {"producer", "fib"}}));
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors) names.push_back(name);
  EXPECT_EQ(f.keys(), names);  // in the order given
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(f.contains(name));
    const SafetensorsEntry* e = f.header().find(name);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->dtype_code, safetensors_code(t.dtype()));
    EXPECT_EQ(e->begin, offset);  // laid out contiguously, in order
    offset += t.nbytes();
    const Tensor back = f.read(name);
    EXPECT_TRUE(back.same_bytes(t));
    EXPECT_NE(back.raw(), t.raw());
    for (std::int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(back.get(i), t.get(i));
  }
  EXPECT_EQ(f.header().data_bytes, offset);
  EXPECT_EQ(f.read("float8_e4m3fn").get(1), -2.0);
  EXPECT_EQ(f.read("matrix").get(8), 4.0);
  EXPECT_EQ(f.read("scalar").shape(), Shape{});
}

TEST(Safetensors, ByteIdenticalToThePythonWriter) {
  // numpy_two_tensors.safetensors was written by safetensors.numpy.save_file (see make.py).
  TempDir tmp;
  Tensor weight(DType::kFloat32, {2, 3});
  for (int i = 0; i < 6; ++i) weight.set(i, i);
  Tensor ids(DType::kInt32, {4});
  for (int i = 0; i < 4; ++i) ids.set(i, 7 + i);
  const fs::path file = tmp.path() / "two.safetensors";
  write_safetensors(file, {{"weight", weight}, {"ids", ids}}, {{"format", "np"}});
  const fs::path ref = testing::test_data_dir() / "safetensors" / "numpy_two_tensors.safetensors";
  ASSERT_TRUE(fs::is_regular_file(ref)) << ref;
  EXPECT_EQ(read_all(file), read_all(ref));
}

TEST(Safetensors, ByteIdenticalToTheRustWriterForSharedDtypes) {
  // The Rust writer's output for the tensors of rust_mixed_dtypes.safetensors that fib can
  // represent, in the writer's order (it sorts by alignment, then name).
  TempDir tmp;
  struct Spec {
    const char* name;
    DType dtype;
    Shape shape;
    std::uint8_t fill;
  };
  const Spec specs[] = {
      {"step", DType::kInt64, {}, 0x66},           {"empty", DType::kFloat32, {0, 3}, 0},
      {"bf16", DType::kBFloat16, {3}, 0x11},       {"half", DType::kFloat16, {2}, 0x44},
      {"fp8", DType::kFloat8E4M3FN, {2, 2}, 0x22}, {"bytes", DType::kUInt8, {5}, 0x55},
      {"fp4", DType::kFloat4E2M1, {2, 4}, 0x33},   {"mask", DType::kBool, {3}, 0x01},
  };
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const Spec& s : specs) {
    Tensor t(s.dtype, s.shape);
    std::memset(t.raw(), s.fill, t.nbytes());
    tensors.emplace_back(s.name, t);
  }
  const fs::path file = tmp.path() / "mixed.safetensors";
  write_safetensors(file, tensors, {{"producer", "safetensors-rust"}});
  const std::string header = R"({"__metadata__":{"producer":"safetensors-rust"},)"
                             R"("step":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
                             R"("empty":{"dtype":"F32","shape":[0,3],"data_offsets":[8,8]},)"
                             R"("bf16":{"dtype":"BF16","shape":[3],"data_offsets":[8,14]},)"
                             R"("half":{"dtype":"F16","shape":[2],"data_offsets":[14,18]},)"
                             R"("fp8":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[18,22]},)"
                             R"("bytes":{"dtype":"U8","shape":[5],"data_offsets":[22,27]},)"
                             R"("fp4":{"dtype":"F4","shape":[2,4],"data_offsets":[27,31]},)"
                             R"("mask":{"dtype":"BOOL","shape":[3],"data_offsets":[31,34]}})";
  const std::string bytes = read_all(file);
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  ASSERT_GE(bytes.size(), 8 + padded.size());
  EXPECT_EQ(bytes.substr(0, 8), testing::le64(padded.size()));
  EXPECT_EQ(bytes.substr(8, padded.size()), padded);
  EXPECT_EQ(bytes.size(), 8 + padded.size() + 34);
}

TEST(Safetensors, ReadsFilesOfTheReferenceWriter) {
  const fs::path dir = testing::test_data_dir() / "safetensors";
  const SafetensorsFile np = SafetensorsFile::open(dir / "numpy_two_tensors.safetensors");
  EXPECT_EQ(np.keys(), (std::vector<std::string>{"weight", "ids"}));
  const Tensor w = np.read("weight");
  EXPECT_EQ(w.dtype(), DType::kFloat32);
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w.get(i), i);
  const Tensor ids = np.read("ids");
  EXPECT_EQ(ids.dtype(), DType::kInt32);
  EXPECT_EQ(std::vector<std::int32_t>(ids.data<std::int32_t>(), ids.data<std::int32_t>() + 4),
            (std::vector<std::int32_t>{7, 8, 9, 10}));

  const SafetensorsFile mixed = SafetensorsFile::open(dir / "rust_mixed_dtypes.safetensors");
  struct Expected {
    const char* name;
    DType dtype;
    Shape shape;
    std::uint8_t fill;
  };
  const Expected expected[] = {
      {"step", DType::kInt64, {}, 0x66},           {"empty", DType::kFloat32, {0, 3}, 0},
      {"bf16", DType::kBFloat16, {3}, 0x11},       {"half", DType::kFloat16, {2}, 0x44},
      {"fp8", DType::kFloat8E4M3FN, {2, 2}, 0x22}, {"bytes", DType::kUInt8, {5}, 0x55},
      {"fp4", DType::kFloat4E2M1, {2, 4}, 0x33},   {"mask", DType::kBool, {3}, 0x01},
  };
  for (const Expected& e : expected) {
    SCOPED_TRACE(e.name);
    const Tensor t = mixed.read(e.name);
    EXPECT_EQ(t.dtype(), e.dtype);
    EXPECT_EQ(t.shape(), e.shape);
    for (std::byte b : t.bytes()) EXPECT_EQ(static_cast<std::uint8_t>(b), e.fill);
  }
  // Values through the numeric formats: bf16 0x1111, e4m3fn 0x22 = 1.25 * 2^-3, fp4 0x3.
  EXPECT_EQ(mixed.read("bf16").get(0), static_cast<double>(numeric::bf16_to_float(0x1111)));
  EXPECT_EQ(mixed.read("fp8").get(3), 0.15625);
  EXPECT_EQ(mixed.read("fp4").get(7), 1.5);
  EXPECT_EQ(mixed.read("mask").get(2), 1.0);

  const Diagnostic cplx = first_error([&] { mixed.read("cplx"); });
  EXPECT_EQ(cplx.file, (dir / "rust_mixed_dtypes.safetensors").string());
  EXPECT_EQ(cplx.message,
            "tensor 'cplx' has safetensors dtype C64, which has no FlashInfer-Trace dtype");
  EXPECT_EQ(first_error([&] { mixed.read("nuz"); }).message,
            "tensor 'nuz' has safetensors dtype F8_E4M3FNUZ, which has no FlashInfer-Trace dtype");
  EXPECT_TRUE(mixed.contains("cplx"));
}

TEST(Safetensors, AlignedWritesPadEveryTensorToTheAlignment) {
  TempDir tmp;
  const fs::path p = tmp.path() / "aligned.safetensors";
  Tensor a(DType::kBFloat16, {3});  // 6 bytes: the next tensor needs 58 bytes of padding
  Tensor b(DType::kFloat32, {5});
  Tensor c(DType::kInt64, {2});
  for (int i = 0; i < 3; ++i) a.set(i, i + 0.5);
  for (int i = 0; i < 5; ++i) b.set(i, -i);
  SafetensorsWriteOptions o;
  o.alignment = 64;
  o.durable = false;
  write_safetensors(p, {{"a", a}, {"b", b}, {"c", c}}, {{"k", "v"}}, o);
  const SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.header().data_offset() % 64, 0u);
  for (const char* name : {"a", "b", "c"}) {
    const auto* e = f.header().find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->begin % 64, 0u) << name;
  }
  EXPECT_TRUE(f.read("a").same_bytes(a));
  EXPECT_TRUE(f.read("b").same_bytes(b));
  EXPECT_TRUE(f.read("c").same_bytes(c));
  // The gaps are uint8 "__pad.N" entries (the format allows no holes), all zero.
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"a", "__pad.0", "b", "__pad.1", "c"}));
  EXPECT_EQ(f.read("__pad.0").nbytes(), 58u);
  EXPECT_EQ(f.read("__pad.1").nbytes(), 44u);
  o.alignment = 48;
  EXPECT_THROW(write_safetensors(p, {{"a", a}}, {}, o), Error);
}

TEST(Safetensors, TensorViewsShareTheirOwnersMemory) {
  auto owner = std::shared_ptr<std::byte[]>(new std::byte[64]());
  Tensor v =
      Tensor::view(DType::kFloat32, {2, 4}, std::shared_ptr<std::byte[]>(owner, owner.get() + 32));
  EXPECT_EQ(v.raw(), owner.get() + 32);
  EXPECT_EQ(v.nbytes(), 32u);
  v.set(1, 2.5);
  float x = 0;
  std::memcpy(&x, owner.get() + 36, sizeof x);
  EXPECT_EQ(x, 2.5f);
  EXPECT_EQ(owner.use_count(), 2);
  EXPECT_THROW(Tensor::view(DType::kFloat32, {1}, nullptr), Error);
}

TEST(Safetensors, UnknownKeySuggestsTheClosest) {
  const SafetensorsFile np = SafetensorsFile::open(testing::test_data_dir() / "safetensors" /
                                                   "numpy_two_tensors.safetensors");
  EXPECT_FALSE(np.contains("weigth"));
  const Diagnostic d = first_error([&] { np.read("weigth"); });
  EXPECT_EQ(d.message, "no tensor named 'weigth'");
  EXPECT_EQ(d.hint, "did you mean 'weight'?");
  EXPECT_EQ(first_error([&] { np.read("zzzzzzzzzzz"); }).hint, "expected one of: weight, ids");
}

TEST(Safetensors, OpenReportsBadFiles) {
  TempDir tmp;
  const fs::path missing = tmp.path() / "missing.safetensors";
  Diagnostic d = first_error([&] { SafetensorsFile::open(missing); });
  EXPECT_EQ(d.file, missing.string());
  EXPECT_EQ(d.message, "file not found");

  EXPECT_EQ(first_error([&] { SafetensorsFile::open(tmp.path()); }).message, "not a regular file");

  const fs::path empty = tmp.write("empty.safetensors", "");
  EXPECT_EQ(first_error([&] { SafetensorsFile::open(empty); }).message,
            "not a safetensors file: 0 bytes, shorter than the 8-byte header length");

  // Every header finding comes through, with its JSON path.
  const fs::path bad = tmp.write(
      "bad.safetensors",
      testing::safetensors_bytes(
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"Q7","shape":[1],"data_offsets":[4,5]}})",
          5));
  try {
    SafetensorsFile::open(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    ASSERT_EQ(e.diagnostics().size(), 2u) << e.what();
    EXPECT_EQ(e.diagnostics().items()[0].file, bad.string());
    EXPECT_EQ(e.diagnostics().items()[0].path, "$.a.data_offsets");
    EXPECT_EQ(e.diagnostics().items()[1].message, "unknown safetensors dtype 'Q7'");
  }
}

TEST(Safetensors, MoveKeepsTheMapping) {
  TempDir tmp;
  Tensor t(DType::kInt16, {2});
  t.set(1, -3);
  write_safetensors(tmp.path() / "a.safetensors", {{"x", t}});
  write_safetensors(tmp.path() / "b.safetensors", {{"y", t}});
  SafetensorsFile a = SafetensorsFile::open(tmp.path() / "a.safetensors");
  SafetensorsFile moved(std::move(a));
  EXPECT_EQ(moved.read("x").get(1), -3.0);
  SafetensorsFile b = SafetensorsFile::open(tmp.path() / "b.safetensors");
  b = std::move(moved);
  EXPECT_EQ(b.read("x").get(1), -3.0);
  EXPECT_FALSE(b.contains("y"));
}

TEST(Safetensors, WriteRejectsBadNamesAndLeavesNothingBehind) {
  TempDir tmp;
  const fs::path file = tmp.path() / "out.safetensors";
  const Tensor t(DType::kFloat32, {1});
  struct Case {
    std::vector<std::pair<std::string, Tensor>> tensors;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"", t}}, "a tensor name must not be empty"},
      {{{"a", t}, {"a", t}}, "tensor name 'a' appears twice"},
      {{{"__metadata__", t}}, "'__metadata__' is reserved and cannot name a tensor"},
      {{{"u", Tensor()}}, "tensor 'u' is undefined"},
      {{{"\xff", t}}, "'\xff' is not valid UTF-8, which a safetensors header (JSON) requires"},
  };
  for (const Case& c : cases) {
    const Diagnostic d = first_error([&] { write_safetensors(file, c.tensors); });
    EXPECT_EQ(d.message, c.message);
    EXPECT_EQ(d.file, file.string());
  }
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

TEST(Safetensors, WriteReplacesAtomically) {
  TempDir tmp;
  const fs::path file = tmp.path() / "sub" / "dir" / "w.safetensors";  // folders are created
  Tensor one(DType::kInt32, {1});
  one.set(0, 1);
  write_safetensors(file, {{"v", one}});
  const SafetensorsFile old_view = SafetensorsFile::open(file);

  Tensor two(DType::kInt32, {2});
  two.set(1, 2);
  write_safetensors(file, {{"v", two}, {"w", one}});
  // The new content replaced the file whole; a reader that opened the old one keeps seeing it.
  const SafetensorsFile now = SafetensorsFile::open(file);
  EXPECT_EQ(now.read("v").numel(), 2);
  EXPECT_EQ(now.read("w").get(0), 1.0);
  EXPECT_EQ(old_view.read("v").numel(), 1);
  EXPECT_EQ(old_view.read("v").get(0), 1.0);
  EXPECT_TRUE(other_files(file.parent_path(), "w.safetensors").empty());
}

TEST(Safetensors, NoTensorsAndEscapedMetadata) {
  TempDir tmp;
  const fs::path file = tmp.path() / "meta.safetensors";
  write_safetensors(file, {}, {{"quote\"and\\slash", "line\nbreak \xc3\xa9"}});
  const SafetensorsFile f = SafetensorsFile::open(file);
  EXPECT_TRUE(f.keys().empty());
  EXPECT_EQ(f.header().metadata, (std::vector<std::pair<std::string, std::string>>{
                                     {"quote\"and\\slash", "line\nbreak \xc3\xa9"}}));
  EXPECT_EQ(f.header().header_bytes % 8, 0u);

  write_safetensors(file, {});
  EXPECT_EQ(read_all(file), testing::le64(8) + "{}      ");
}

}  // namespace
}  // namespace fib

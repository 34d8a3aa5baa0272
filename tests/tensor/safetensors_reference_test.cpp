// Files written by the real safetensors library (tests/data/safetensors, made by make.py there):
// fib must read exactly what the format's own writer produces.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fib/tensor/safetensors_header.h"
#include "support/test_paths.h"

namespace fib {
namespace {

namespace fs = std::filesystem;

fs::path reference_file(const std::string& name) {
  return testing::test_data_dir() / "safetensors" / name;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SafetensorsReference, NumpyTwoTensors) {
  const fs::path file = reference_file("numpy_two_tensors.safetensors");
  ASSERT_TRUE(fs::is_regular_file(file)) << file;
  const std::string bytes = read_all(file);
  ASSERT_EQ(bytes.size(), 200u);
  Diagnostics diag;
  const auto h = read_safetensors_header(file.string(), diag);
  ASSERT_TRUE(h) << diag.to_string();
  EXPECT_TRUE(diag.empty());
  // The writer pads the header with spaces so the data starts 8-byte aligned.
  EXPECT_EQ(h->header_bytes, 152u);
  EXPECT_EQ(h->data_offset(), 160u);
  EXPECT_EQ(h->data_offset() % 8, 0u);
  EXPECT_EQ(h->data_bytes, 40u);
  EXPECT_EQ(h->metadata, (std::vector<std::pair<std::string, std::string>>{{"format", "np"}}));
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->tensors[0].name, "weight");
  EXPECT_EQ(h->tensors[1].name, "ids");

  const SafetensorsEntry* w = h->find("weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype_code, "F32");
  EXPECT_EQ(w->dtype, DType::kFloat32);
  EXPECT_EQ(w->shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(w->begin, 0u);
  EXPECT_EQ(w->end, 24u);
  float values[6];
  std::memcpy(values, bytes.data() + h->data_offset() + w->begin, sizeof values);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(values[i], static_cast<float>(i));

  const SafetensorsEntry* ids = h->find("ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype, DType::kInt32);
  EXPECT_EQ(ids->shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(ids->begin, 24u);
  EXPECT_EQ(ids->end, 40u);
  std::int32_t id_values[4];
  std::memcpy(id_values, bytes.data() + h->data_offset() + ids->begin, sizeof id_values);
  EXPECT_EQ(std::vector<std::int32_t>(id_values, id_values + 4),
            (std::vector<std::int32_t>{7, 8, 9, 10}));

  // The same bytes through the in-memory parser give the same header.
  Diagnostics diag2;
  const auto h2 = parse_safetensors_header(bytes, bytes.size(), "mem", diag2);
  ASSERT_TRUE(h2) << diag2.to_string();
  EXPECT_EQ(h2->header_bytes, h->header_bytes);
  EXPECT_EQ(h2->tensors.size(), h->tensors.size());
}

TEST(SafetensorsReference, RustMixedDtypes) {
  const fs::path file = reference_file("rust_mixed_dtypes.safetensors");
  ASSERT_TRUE(fs::is_regular_file(file)) << file;
  const std::string bytes = read_all(file);
  ASSERT_EQ(bytes.size(), 700u);
  Diagnostics diag;
  const auto h = read_safetensors_header(file.string(), diag);
  ASSERT_TRUE(h) << diag.to_string();
  EXPECT_TRUE(diag.empty());
  EXPECT_EQ(h->header_bytes, 648u);
  EXPECT_EQ(h->data_bytes, 44u);
  EXPECT_EQ(h->metadata,
            (std::vector<std::pair<std::string, std::string>>{{"producer", "safetensors-rust"}}));

  struct Expected {
    std::string name, code;
    std::optional<DType> dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t begin, end;
    unsigned char fill;  // every data byte of the tensor (see make.py)
  };
  // In the writer's order (largest alignment first), which fib keeps.
  const std::vector<Expected> expected = {
      {"step", "I64", DType::kInt64, {}, 0, 8, 0x66},
      {"cplx", "C64", std::nullopt, {1}, 8, 16, 0x88},
      {"empty", "F32", DType::kFloat32, {0, 3}, 16, 16, 0x00},
      {"bf16", "BF16", DType::kBFloat16, {3}, 16, 22, 0x11},
      {"half", "F16", DType::kFloat16, {2}, 22, 26, 0x44},
      {"nuz", "F8_E4M3FNUZ", std::nullopt, {2}, 26, 28, 0x77},
      {"fp8", "F8_E4M3", DType::kFloat8E4M3FN, {2, 2}, 28, 32, 0x22},
      {"bytes", "U8", DType::kUInt8, {5}, 32, 37, 0x55},
      {"fp4", "F4", DType::kFloat4E2M1, {2, 4}, 37, 41, 0x33},  // 8 values in 4 bytes
      {"mask", "BOOL", DType::kBool, {3}, 41, 44, 0x01},
  };
  ASSERT_EQ(h->tensors.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Expected& e = expected[i];
    const SafetensorsEntry& t = h->tensors[i];
    SCOPED_TRACE(e.name);
    EXPECT_EQ(t.name, e.name);
    EXPECT_EQ(t.dtype_code, e.code);
    EXPECT_EQ(t.dtype, e.dtype);
    EXPECT_EQ(t.shape, e.shape);
    EXPECT_EQ(t.begin, e.begin);
    EXPECT_EQ(t.end, e.end);
    EXPECT_EQ(h->find(e.name), &t);
    for (std::uint64_t b = t.begin; b < t.end; ++b) {
      EXPECT_EQ(static_cast<unsigned char>(bytes[h->data_offset() + b]), e.fill) << "byte " << b;
    }
  }
}

}  // namespace
}  // namespace fib

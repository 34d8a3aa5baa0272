// Tensor: storage (zeroed, aligned, shared), typed access and its checks, element get/set for
// every dtype (float4_e2m1 nibbles, bool), clone/reshape/same_bytes, and dtype conversions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/tensor/numeric.h"
#include "fib/tensor/tensor.h"

namespace fib {
namespace {

std::string error_text(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no fib::Error thrown)";
}

std::uint8_t byte_at(const Tensor& t, std::size_t i) {
  return static_cast<std::uint8_t>(t.bytes()[i]);
}

TEST(Shape, Numel) {
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({2, 3}), 6);
  EXPECT_EQ(shape_numel({4, 0, 5}), 0);
  EXPECT_EQ(shape_numel({std::int64_t{1} << 31, std::int64_t{1} << 31}), std::int64_t{1} << 62);
  EXPECT_EQ(error_text([] {
              shape_numel({2, -1});
            }),
            "error: shape [2, -1] has a negative dimension (-1)");
  EXPECT_EQ(error_text([] {
              shape_numel({std::int64_t{1} << 32, std::int64_t{1} << 32});
            }),
            "error: shape [4294967296, 4294967296] has more elements than fit in 64 bits");
  // A zero dimension after an overflowing product is still an overflow of the product so far.
  EXPECT_THROW(shape_numel({std::int64_t{1} << 40, std::int64_t{1} << 40, 0}), Error);
}

TEST(Shape, ToString) {
  EXPECT_EQ(shape_to_string({}), "[]");
  EXPECT_EQ(shape_to_string({7}), "[7]");
  EXPECT_EQ(shape_to_string({2, 3, 4}), "[2, 3, 4]");
}

TEST(Tensor, DefaultIsUndefined) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_FALSE(t.clone().defined());
  EXPECT_THROW(to_float32(t), Error);
  EXPECT_THROW(cast(t, DType::kInt32), Error);
}

TEST(Tensor, StorageIsZeroedAlignedAndSized) {
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    Tensor t(d, {3, 5});
    EXPECT_TRUE(t.defined());
    EXPECT_EQ(t.dtype(), d);
    EXPECT_EQ(t.shape(), (Shape{3, 5}));
    EXPECT_EQ(t.rank(), 2u);
    EXPECT_EQ(t.dim(1), 5);
    EXPECT_THROW((void)t.dim(2), std::out_of_range);
    EXPECT_EQ(t.numel(), 15);
    EXPECT_EQ(t.nbytes(),
              d == DType::kFloat4E2M1 ? 8u : 15u * static_cast<unsigned>(dtype_bits(d) / 8));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw()) % kTensorAlignment, 0u);
    for (std::byte b : t.bytes()) ASSERT_EQ(b, std::byte{0});
    for (std::int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get(i), 0.0);
  }
}

TEST(Tensor, EmptyAndScalarShapes) {
  Tensor empty(DType::kBFloat16, {0, 3});
  EXPECT_TRUE(empty.defined());
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.nbytes(), 0u);
  EXPECT_TRUE(to_float32(empty).same_bytes(Tensor(DType::kFloat32, {0, 3})));
  EXPECT_TRUE(empty.clone().same_bytes(empty));
  EXPECT_THROW(empty.get(0), Error);

  Tensor scalar(DType::kInt64, {});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.nbytes(), 8u);
  scalar.set(0, -5);
  EXPECT_EQ(scalar.get(0), -5.0);
}

TEST(Tensor, BadShapesThrow) {
  EXPECT_THROW(Tensor(DType::kFloat32, {-1}), Error);
  EXPECT_EQ(error_text([] {
              Tensor(DType::kInt64, {std::int64_t{1} << 62, 4});
            }),
            "error: shape [4611686018427387904, 4] has more elements than fit in 64 bits");
  EXPECT_EQ(error_text([] { Tensor(DType::kInt64, {std::int64_t{1} << 61}); }),
            "error: a tensor of dtype int64 and shape [2305843009213693952] is too large to "
            "allocate");
}

TEST(Tensor, TypedAccessIsChecked) {
  Tensor t(DType::kBFloat16, {4});
  EXPECT_NO_THROW(t.data<std::uint16_t>());
  EXPECT_EQ(error_text([&] { t.data<float>(); }),
            "error: a bfloat16 tensor cannot be accessed as float: its element storage type is "
            "std::uint16_t");
  const Tensor& ct = t;
  EXPECT_NO_THROW(ct.data<std::uint16_t>());
  EXPECT_NO_THROW(ct.data<const std::uint16_t>());
  EXPECT_THROW(ct.data<std::int16_t>(), Error);
  EXPECT_EQ(static_cast<const void*>(ct.data<std::uint16_t>()), ct.raw());

  struct Expect {
    DType dtype;
    bool f, u16, u8, i64, i32, i16, i8;
  };
  const Expect table[] = {
      {DType::kFloat32, true, false, false, false, false, false, false},
      {DType::kFloat16, false, true, false, false, false, false, false},
      {DType::kBFloat16, false, true, false, false, false, false, false},
      {DType::kFloat8E4M3FN, false, false, true, false, false, false, false},
      {DType::kFloat8E5M2, false, false, true, false, false, false, false},
      {DType::kFloat4E2M1, false, false, true, false, false, false, false},
      {DType::kInt64, false, false, false, true, false, false, false},
      {DType::kInt32, false, false, false, false, true, false, false},
      {DType::kInt16, false, false, false, false, false, true, false},
      {DType::kInt8, false, false, false, false, false, false, true},
      {DType::kUInt8, false, false, true, false, false, false, false},
      {DType::kBool, false, false, true, false, false, false, false},
  };
  for (const Expect& e : table) {
    SCOPED_TRACE(std::string(dtype_name(e.dtype)));
    EXPECT_EQ(is_storage_type<float>(e.dtype), e.f);
    EXPECT_EQ(is_storage_type<std::uint16_t>(e.dtype), e.u16);
    EXPECT_EQ(is_storage_type<std::uint8_t>(e.dtype), e.u8);
    EXPECT_EQ(is_storage_type<std::int64_t>(e.dtype), e.i64);
    EXPECT_EQ(is_storage_type<std::int32_t>(e.dtype), e.i32);
    EXPECT_EQ(is_storage_type<std::int16_t>(e.dtype), e.i16);
    EXPECT_EQ(is_storage_type<std::int8_t>(e.dtype), e.i8);
    EXPECT_FALSE(is_storage_type<double>(e.dtype));
    EXPECT_FALSE(is_storage_type<bool>(e.dtype));
  }
}

TEST(Tensor, GetSetFloatFormats) {
  struct Case {
    DType dtype;
    double in, out;
  };
  const Case cases[] = {
      {DType::kFloat32, 0.1, static_cast<double>(0.1f)},
      {DType::kFloat16, 1.0 / 3, static_cast<double>(numeric::fp16_to_float(0x3555))},
      {DType::kFloat16, 70000, INFINITY},
      {DType::kBFloat16, 1.0 / 3, static_cast<double>(numeric::bf16_to_float(0x3EAB))},
      {DType::kFloat8E4M3FN, 300, 288},
      {DType::kFloat8E4M3FN, -0.1, -0.1015625},
      {DType::kFloat8E5M2, 300, 320},
      {DType::kFloat4E2M1, 2.7, 3},
      {DType::kFloat4E2M1, -100, -6},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + std::to_string(c.in));
    Tensor t(c.dtype, {3});
    t.set(1, c.in);
    EXPECT_EQ(t.get(1), c.out);
    EXPECT_EQ(t.get(0), 0.0);
    EXPECT_EQ(t.get(2), 0.0);
  }
  // A double goes through float32 first (one extra rounding, as PyTorch): 1 + 2^-11 + 2^-30
  // would round up to float16 directly, but is 1 + 2^-11 in float32, a tie that rounds down.
  Tensor h(DType::kFloat16, {1});
  h.set(0, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30));
  EXPECT_EQ(h.data<std::uint16_t>()[0], 0x3C00);

  Tensor e4(DType::kFloat8E4M3FN, {1});
  e4.set(0, NAN);
  EXPECT_TRUE(std::isnan(e4.get(0)));
  e4.set(0, 1000);
  EXPECT_TRUE(std::isnan(e4.get(0)));
}

TEST(Tensor, Float4PacksTwoPerByteLowNibbleFirst) {
  Tensor t(DType::kFloat4E2M1, {5});
  ASSERT_EQ(t.nbytes(), 3u);
  const double values[5] = {0.5, -1.0, 6.0, 1.5, -3.0};  // codes 1, A, 7, 3, D
  for (int i = 0; i < 5; ++i) t.set(i, values[i]);
  EXPECT_EQ(byte_at(t, 0), 0xA1);
  EXPECT_EQ(byte_at(t, 1), 0x37);
  EXPECT_EQ(byte_at(t, 2), 0x0D);  // the padding nibble stays 0
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.get(i), values[i]) << i;
  // Setting one nibble leaves its neighbour alone.
  t.set(1, 0);
  EXPECT_EQ(byte_at(t, 0), 0x01);
  t.set(0, -0.0);
  EXPECT_EQ(byte_at(t, 0), 0x08);
  EXPECT_EQ(t.data<std::uint8_t>()[1], 0x37);
  EXPECT_THROW(t.get(5), Error);
  EXPECT_THROW(t.set(-1, 1), Error);
}

TEST(Tensor, GetSetIntegersAndBool) {
  struct Case {
    DType dtype;
    double in, out;
  };
  const Case cases[] = {
      {DType::kInt64, 1e15, 1e15},
      {DType::kInt64, -2.9, -2},
      {DType::kInt64, 1e30, 9223372036854775807.0},
      {DType::kInt64, -1e30, -9223372036854775808.0},
      {DType::kInt32, 2.9, 2},
      {DType::kInt32, -2147483648.0, -2147483648.0},
      {DType::kInt32, 2147483648.0, -2147483648.0},  // wraps
      {DType::kInt16, 40000, 40000 - 65536},
      {DType::kInt8, 300, 44},
      {DType::kInt8, -129, 127},
      {DType::kUInt8, -1, 255},
      {DType::kUInt8, 256.5, 0},
      {DType::kInt32, NAN, 0},
      {DType::kBool, 2.5, 1},
      {DType::kBool, -0.0, 0},
      {DType::kBool, NAN, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + std::to_string(c.in));
    Tensor t(c.dtype, {2});
    t.set(1, c.in);
    EXPECT_EQ(t.get(1), c.out);
    EXPECT_EQ(t.get(0), 0.0);
  }
  // Any non-zero byte reads as true.
  Tensor b(DType::kBool, {1});
  b.data<std::uint8_t>()[0] = 7;
  EXPECT_EQ(b.get(0), 1.0);
  EXPECT_EQ(to_float32(b).data<float>()[0], 1.0f);
  EXPECT_EQ(cast(b, DType::kInt32).data<std::int32_t>()[0], 1);
}

TEST(Tensor, CloneIsDeepReshapeIsShared) {
  Tensor a(DType::kInt32, {2, 3});
  for (int i = 0; i < 6; ++i) a.set(i, i);
  Tensor c = a.clone();
  EXPECT_TRUE(c.same_bytes(a));
  EXPECT_NE(c.raw(), a.raw());
  c.set(0, 100);
  EXPECT_EQ(a.get(0), 0.0);
  EXPECT_FALSE(c.same_bytes(a));

  Tensor r = a.reshape({3, 2});
  EXPECT_EQ(r.raw(), a.raw());
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  r.set(5, -1);
  EXPECT_EQ(a.get(5), -1.0);
  EXPECT_FALSE(r.same_bytes(a));  // same bytes, different shape
  EXPECT_TRUE(r.reshape({2, 3}).same_bytes(a));
  EXPECT_EQ(a.reshape({6}).rank(), 1u);
  EXPECT_EQ(a.reshape({1, 6, 1}).numel(), 6);
  EXPECT_EQ(error_text([&] {
              (void)a.reshape({4, 2});
            }),
            "error: cannot reshape a tensor of shape [2, 3] (6 elements) to [4, 2] (8 elements)");
  EXPECT_THROW((void)a.reshape({-6}), Error);

  // Copies share storage, which outlives the original.
  Tensor shared;
  {
    Tensor tmp(DType::kFloat32, {2});
    tmp.set(1, 2.5);
    shared = tmp;
  }
  EXPECT_EQ(shared.get(1), 2.5);
}

TEST(Tensor, SameBytes) {
  Tensor a(DType::kUInt8, {4});
  Tensor b(DType::kInt8, {4});
  Tensor c(DType::kUInt8, {2, 2});
  EXPECT_TRUE(a.same_bytes(Tensor(DType::kUInt8, {4})));
  EXPECT_FALSE(a.same_bytes(b));
  EXPECT_FALSE(a.same_bytes(c));
  EXPECT_FALSE(a.same_bytes(Tensor()));
  EXPECT_TRUE(Tensor().same_bytes(Tensor()));
}

TEST(Tensor, ToAndFromFloat32MatchScalarConversions) {
  const std::vector<float> values = {0.0f,     -0.0f,     1.0f,   -2.5f,  0.1f,    1e-3f, 65504.0f,
                                     1e5f,     -1e5f,     448.0f, 470.0f, 3.0e-5f, 5.0f,  -5.5f,
                                     INFINITY, -INFINITY, NAN,    1e-40f, 7.0f};
  const auto n = static_cast<std::int64_t>(values.size());
  Tensor f(DType::kFloat32, {n});
  std::memcpy(f.raw(), values.data(), values.size() * sizeof(float));

  auto check = [&](DType d, auto encode, auto decode) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const Tensor narrow = from_float32(f, d);
    ASSERT_EQ(narrow.dtype(), d);
    ASSERT_EQ(narrow.shape(), f.shape());
    const Tensor back = to_float32(narrow);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto code = encode(values[static_cast<std::size_t>(i)]);
      ASSERT_EQ(narrow.data<decltype(code)>()[i], code) << i;
      EXPECT_EQ(std::bit_cast<std::uint32_t>(back.data<float>()[i]),
                std::bit_cast<std::uint32_t>(decode(code)))
          << i;
    }
    EXPECT_TRUE(cast(f, d).same_bytes(narrow));
    EXPECT_TRUE(cast(narrow, DType::kFloat32).same_bytes(back));
  };
  check(DType::kFloat16, numeric::float_to_fp16, numeric::fp16_to_float);
  check(DType::kBFloat16, numeric::float_to_bf16, numeric::bf16_to_float);
  check(DType::kFloat8E4M3FN, numeric::float_to_fp8_e4m3fn, numeric::fp8_e4m3fn_to_float);
  check(DType::kFloat8E5M2, numeric::float_to_fp8_e5m2, numeric::fp8_e5m2_to_float);

  EXPECT_TRUE(from_float32(f, DType::kFloat32).same_bytes(f));
  EXPECT_NE(from_float32(f, DType::kFloat32).raw(), f.raw());
  EXPECT_TRUE(to_float32(f).same_bytes(f));
  EXPECT_EQ(error_text([&] { from_float32(Tensor(DType::kBFloat16, {1}), DType::kFloat16); }),
            "error: from_float32 needs a float32 tensor, not bfloat16");

  // float4: an odd count leaves the padding nibble zero.
  const Tensor q = from_float32(f, DType::kFloat4E2M1);
  ASSERT_EQ(q.nbytes(), (values.size() + 1) / 2);
  EXPECT_EQ(byte_at(q, q.nbytes() - 1) >> 4, 0);
  const Tensor qf = to_float32(q);
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = values[static_cast<std::size_t>(i)];
    EXPECT_EQ(qf.data<float>()[i], numeric::fp4_e2m1_to_float(numeric::float_to_fp4_e2m1(v))) << i;
    EXPECT_EQ(q.get(i), static_cast<double>(qf.data<float>()[i]));
  }
  EXPECT_TRUE(from_float32(qf, DType::kFloat4E2M1).same_bytes(q));
}

TEST(Tensor, FloatToNarrowFloatGoesThroughFloat32) {
  Tensor b(DType::kBFloat16, {3});
  b.set(0, 1.0 / 3);
  b.set(1, 1e30);
  b.set(2, -0.0);
  const Tensor h = cast(b, DType::kFloat16);
  EXPECT_EQ(h.data<std::uint16_t>()[0],
            numeric::float_to_fp16(numeric::bf16_to_float(b.data<std::uint16_t>()[0])));
  EXPECT_EQ(h.data<std::uint16_t>()[1], 0x7C00);
  EXPECT_EQ(h.data<std::uint16_t>()[2], 0x8000);
  const Tensor e = cast(h, DType::kFloat8E5M2);
  EXPECT_EQ(e.data<std::uint8_t>()[1], 0x7C);
  const Tensor q = cast(b, DType::kFloat4E2M1);
  EXPECT_EQ(q.get(0), 0.5);
  EXPECT_EQ(q.get(1), 6.0);
}

TEST(Tensor, CastBetweenIntegersAndFloats) {
  Tensor i64(DType::kInt64, {6});
  const std::int64_t vals[6] = {
      0, -1, 300, (std::int64_t{1} << 24) + 1, std::numeric_limits<std::int64_t>::max(), -70000};
  std::memcpy(i64.raw(), vals, sizeof vals);

  const Tensor i8 = cast(i64, DType::kInt8);
  EXPECT_EQ(std::vector<std::int8_t>(i8.data<std::int8_t>(), i8.data<std::int8_t>() + 6),
            (std::vector<std::int8_t>{0, -1, 44, 1, -1, -112}));
  const Tensor u8 = cast(i64, DType::kUInt8);
  EXPECT_EQ(u8.data<std::uint8_t>()[1], 255);
  const Tensor b = cast(i64, DType::kBool);
  EXPECT_EQ(std::vector<std::uint8_t>(b.data<std::uint8_t>(), b.data<std::uint8_t>() + 6),
            (std::vector<std::uint8_t>{0, 1, 1, 1, 1, 1}));
  const Tensor back = cast(cast(i64, DType::kInt32), DType::kInt64);
  EXPECT_EQ(back.data<std::int64_t>()[5], -70000);

  const Tensor f = cast(i64, DType::kFloat32);
  EXPECT_EQ(f.data<float>()[3], 16777216.0f);  // 2^24 + 1 rounds to even
  EXPECT_EQ(f.data<float>()[4], 9223372036854775808.0f);
  const Tensor h = cast(i64, DType::kFloat16);
  EXPECT_EQ(h.data<std::uint16_t>()[2], numeric::float_to_fp16(300.0f));
  EXPECT_EQ(h.data<std::uint16_t>()[5], 0xFC00);  // -70000 overflows to -inf
  EXPECT_EQ(cast(i64, DType::kFloat4E2M1).get(2), 6.0);

  Tensor fl(DType::kFloat32, {7});
  const float fv[7] = {2.9f, -2.9f, NAN, 1e20f, -1e20f, 255.5f, -0.5f};
  std::memcpy(fl.raw(), fv, sizeof fv);
  const Tensor to64 = cast(fl, DType::kInt64);
  EXPECT_EQ(std::vector<std::int64_t>(to64.data<std::int64_t>(), to64.data<std::int64_t>() + 7),
            (std::vector<std::int64_t>{2, -2, 0, std::numeric_limits<std::int64_t>::max(),
                                       std::numeric_limits<std::int64_t>::min(), 255, 0}));
  const Tensor tou8 = cast(fl, DType::kUInt8);
  EXPECT_EQ(tou8.data<std::uint8_t>()[1], 254);  // -2 wraps
  EXPECT_EQ(tou8.data<std::uint8_t>()[5], 255);
  const Tensor tob = cast(fl, DType::kBool);
  EXPECT_EQ(std::vector<std::uint8_t>(tob.data<std::uint8_t>(), tob.data<std::uint8_t>() + 7),
            (std::vector<std::uint8_t>{1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(from_float32(fl, DType::kInt16).get(0), 2.0);

  // bf16 -> int goes through the decoded value.
  Tensor bf(DType::kBFloat16, {1});
  bf.set(0, -7.9);
  EXPECT_EQ(cast(bf, DType::kInt32).data<std::int32_t>()[0], -7);

  // The same dtype is a deep copy.
  const Tensor same = cast(i64, DType::kInt64);
  EXPECT_TRUE(same.same_bytes(i64));
  EXPECT_NE(same.raw(), i64.raw());
}

}  // namespace
}  // namespace fib

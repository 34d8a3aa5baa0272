// fib/solution.h: the interface between fib and a C++ solution (language "cpp", binding "fib").
//
// Self-contained C++17; include nothing else from fib. A solution is a shared object built by
// fib from the solution's sources; its entry point `file::symbol` names a function exported
// with FIB_EXPORT_SOLUTION. Two calling styles, chosen by the solution's
// `spec.destination_passing_style` (default true):
//
//   Destination-passing: the harness allocates every output; the function takes the inputs
//   then the outputs, in the definition's order, and writes the outputs.
//
//     void rmsnorm(fib::TensorView x, fib::TensorView w, fib::TensorView y) { ... }
//     FIB_EXPORT_SOLUTION(run, rmsnorm)
//
//   Value-returning: the function takes the inputs and returns its outputs (one TensorView, or
//   a std::tuple of them in the definition's output order), allocated with fib::allocate(),
//   which hands out harness-owned memory (never free it).
//
//     fib::TensorView rmsnorm(fib::TensorView x, fib::TensorView w) {
//       fib::TensorView y = fib::allocate(fib::DType::kBFloat16, {x.size(0), x.size(1)});
//       ...
//       return y;
//     }
//     FIB_EXPORT_SOLUTION(run, rmsnorm)
//
// Parameters: fib::TensorView for tensors, fib::OptionalTensor for optional inputs, and
// int64_t / int32_t / int / double / float / bool for scalar inputs (shape null). Throw
// fib::Error (or any std::exception) to fail the call with a message. Tensors are row-major
// and contiguous unless strides() say otherwise; CPU tensors live in host memory.
//
// CUDA solutions (language "cuda", or "cpp" for a GPU target) get device pointers (inputs,
// outputs and fib::allocate'd memory are on the device of `--device cuda:N`, which is current)
// and launch their work on fib::stream(), the stream fib times. Work forked onto another stream
// must be joined back to fib::stream() (an event) before the function returns: fib checks that
// every kernel of a call runs inside the call's window on its stream. Do not synchronize the
// device inside a call. A launch error the solution does not check is found by fib after the
// call; an illegal address ends the worker (RUNTIME_ERROR) and fib starts a fresh one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#define FIB_SOLUTION_ABI_VERSION 1

// ---- The C ABI (what crosses the shared-object boundary) ------------------------------------
extern "C" {

// Element types, numbered as here forever.
enum fib_dtype_code {
  FIB_DTYPE_FLOAT32 = 0,
  FIB_DTYPE_FLOAT16 = 1,
  FIB_DTYPE_BFLOAT16 = 2,
  FIB_DTYPE_FLOAT8_E4M3FN = 3,
  FIB_DTYPE_FLOAT8_E5M2 = 4,
  FIB_DTYPE_FLOAT4_E2M1 = 5,  // two elements per byte, element 2i in the low nibble
  FIB_DTYPE_INT64 = 6,
  FIB_DTYPE_INT32 = 7,
  FIB_DTYPE_INT16 = 8,
  FIB_DTYPE_INT8 = 9,
  FIB_DTYPE_UINT8 = 10,
  FIB_DTYPE_BOOL = 11,
};

enum fib_device_code { FIB_DEVICE_CPU = 1, FIB_DEVICE_CUDA = 2 };

#define FIB_MAX_RANK 8

typedef struct fib_tensor {
  void* data;
  std::int64_t shape[FIB_MAX_RANK];
  std::int64_t strides[FIB_MAX_RANK];  // in elements
  std::int32_t ndim;
  std::int32_t dtype;        // fib_dtype_code
  std::int32_t device_type;  // fib_device_code
  std::int32_t device_id;
} fib_tensor;

enum fib_value_kind {
  FIB_VALUE_TENSOR = 0,
  FIB_VALUE_INT = 1,
  FIB_VALUE_FLOAT = 2,
  FIB_VALUE_BOOL = 3,
  FIB_VALUE_ABSENT = 4,  // an optional input the workload does not give
};

typedef struct fib_value {
  std::int32_t kind;  // fib_value_kind
  fib_tensor tensor;
  std::int64_t i;  // FIB_VALUE_INT, FIB_VALUE_BOOL (0/1)
  double f;        // FIB_VALUE_FLOAT
} fib_value;

// Harness-owned memory for value-returning solutions. Returns 0 and fills *out on success.
typedef struct fib_allocator {
  void* context;
  int (*allocate)(void* context, std::int32_t dtype, const std::int64_t* shape, std::int32_t ndim,
                  fib_tensor* out);
} fib_allocator;

typedef struct fib_call {
  std::uint32_t abi_version;         // FIB_SOLUTION_ABI_VERSION of the harness
  std::int32_t destination_passing;  // 1: args = inputs then outputs; 0: args = inputs
  const fib_value* args;
  std::int32_t num_args;
  fib_tensor* results;  // value-returning: the solution fills num_results entries
  std::int32_t num_results;
  const fib_allocator* allocator;
  void* stream;  // the CUDA stream to launch on (cuda solutions); null on CPU
  char* error;   // a message on failure, NUL-terminated, at most error_capacity bytes
  std::size_t error_capacity;
} fib_call;

// An exported entry point: returns 0 on success, non-zero with call->error set on failure.
typedef int (*fib_entry_fn)(fib_call* call);
}

// ---- The C++ side (what solution authors use) ----------------------------------------------
// fib itself includes only the C ABI above (FIB_SOLUTION_C_API_ONLY): its own fib:: names
// (DType, Error) are different types.
#ifndef FIB_SOLUTION_C_API_ONLY
namespace fib {

enum class DType : std::int32_t {
  kFloat32 = FIB_DTYPE_FLOAT32,
  kFloat16 = FIB_DTYPE_FLOAT16,
  kBFloat16 = FIB_DTYPE_BFLOAT16,
  kFloat8E4M3FN = FIB_DTYPE_FLOAT8_E4M3FN,
  kFloat8E5M2 = FIB_DTYPE_FLOAT8_E5M2,
  kFloat4E2M1 = FIB_DTYPE_FLOAT4_E2M1,
  kInt64 = FIB_DTYPE_INT64,
  kInt32 = FIB_DTYPE_INT32,
  kInt16 = FIB_DTYPE_INT16,
  kInt8 = FIB_DTYPE_INT8,
  kUInt8 = FIB_DTYPE_UINT8,
  kBool = FIB_DTYPE_BOOL,
};

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat8E4M3FN:
      return "float8_e4m3fn";
    case DType::kFloat8E5M2:
      return "float8_e5m2";
    case DType::kFloat4E2M1:
      return "float4_e2m1";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kInt16:
      return "int16";
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
  }
  return "unknown";
}

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A view of a harness-owned tensor (cheap to copy; owns nothing).
class TensorView {
 public:
  TensorView() = default;
  explicit TensorView(const fib_tensor& t) : t_(t) {}

  void* data() const { return t_.data; }
  template <typename T>
  T* data_ptr() const {
    return static_cast<T*>(t_.data);
  }
  DType dtype() const { return static_cast<DType>(t_.dtype); }
  int ndim() const { return t_.ndim; }
  const std::int64_t* shape() const { return t_.shape; }
  const std::int64_t* strides() const { return t_.strides; }
  // Size of dimension i; negative i counts from the end.
  std::int64_t size(int i) const { return t_.shape[i < 0 ? i + t_.ndim : i]; }
  std::int64_t stride(int i) const { return t_.strides[i < 0 ? i + t_.ndim : i]; }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < t_.ndim; ++i) n *= t_.shape[i];
    return n;
  }
  bool is_contiguous() const {
    std::int64_t expected = 1;
    for (int i = t_.ndim - 1; i >= 0; --i) {
      if (t_.shape[i] != 1 && t_.strides[i] != expected) return false;
      expected *= t_.shape[i];
    }
    return true;
  }
  bool on_cuda() const { return t_.device_type == FIB_DEVICE_CUDA; }
  const fib_tensor& raw() const { return t_; }

 private:
  fib_tensor t_{};
};

// An optional input: has_value() is false when the workload does not give it.
class OptionalTensor {
 public:
  OptionalTensor() = default;
  explicit OptionalTensor(const TensorView& t) : t_(t), present_(true) {}
  bool has_value() const { return present_; }
  explicit operator bool() const { return present_; }
  const TensorView& value() const {
    if (!present_) throw Error("optional input is absent");
    return t_;
  }
  const TensorView* operator->() const { return &value(); }

 private:
  TensorView t_;
  bool present_ = false;
};

// bfloat16 and float16 bit patterns <-> float (round to nearest even), for CPU solutions.
inline float bf16_to_float(std::uint16_t b) {
  std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float fp16_to_float(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    u = sign | (static_cast<std::uint32_t>(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline std::uint16_t float_to_fp16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  std::uint32_t sign = (u >> 16) & 0x8000u;
  std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow: inf
  if (abs < 0x38800000u) {  // subnormal or zero in fp16: round at the fixed point 2^-24
    float a;
    std::memcpy(&a, &abs, sizeof a);
    float scaled = a * 16777216.0f;  // exact: a power-of-two scale
    auto q = static_cast<std::uint32_t>(scaled);
    float rem = scaled - static_cast<float>(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

namespace detail {
inline thread_local const fib_allocator* current_allocator = nullptr;
inline thread_local void* current_stream = nullptr;
}  // namespace detail

// The CUDA stream of the current call (a cudaStream_t; null for CPU solutions and outside a
// call). In CUDA code: `kernel<<<grid, block, smem, fib::stream()>>>(...)`.
#if defined(__CUDACC__) || defined(CUDART_VERSION)
inline cudaStream_t stream() { return static_cast<cudaStream_t>(detail::current_stream); }
#else
inline void* stream() { return detail::current_stream; }
#endif

// Allocates an output of a value-returning solution in harness-owned memory (row-major,
// contiguous, 64-byte aligned). Only valid during a call; throws fib::Error otherwise.
inline TensorView allocate(DType dtype, std::initializer_list<std::int64_t> shape) {
  const fib_allocator* a = detail::current_allocator;
  if (a == nullptr) throw Error("fib::allocate called outside a solution call");
  if (shape.size() > FIB_MAX_RANK) throw Error("fib::allocate: rank above FIB_MAX_RANK");
  std::int64_t dims[FIB_MAX_RANK] = {};
  std::int32_t n = 0;
  for (std::int64_t d : shape) dims[n++] = d;
  fib_tensor out{};
  if (a->allocate(a->context, static_cast<std::int32_t>(dtype), dims, n, &out) != 0) {
    throw std::bad_alloc();
  }
  return TensorView(out);
}

namespace detail {

template <typename T>
struct ArgKind;  // which C++ parameter types a solution may take, and how each is converted

template <>
struct ArgKind<TensorView> {
  static constexpr char code = 'T';
  static TensorView get(const fib_value& v, int index) {
    if (v.kind != FIB_VALUE_TENSOR) throw_kind(index, "a tensor");
    return TensorView(v.tensor);
  }
  [[noreturn]] static void throw_kind(int index, const char* expected) {
    throw Error("argument " + std::to_string(index) + ": expected " + expected);
  }
};
template <>
struct ArgKind<OptionalTensor> {
  static constexpr char code = 'O';
  static OptionalTensor get(const fib_value& v, int index) {
    if (v.kind == FIB_VALUE_ABSENT) return OptionalTensor();
    if (v.kind != FIB_VALUE_TENSOR) ArgKind<TensorView>::throw_kind(index, "a tensor or nothing");
    return OptionalTensor(TensorView(v.tensor));
  }
};
template <>
struct ArgKind<bool> {
  static constexpr char code = 'b';
  static bool get(const fib_value& v, int index) {
    if (v.kind == FIB_VALUE_BOOL || v.kind == FIB_VALUE_INT) return v.i != 0;
    ArgKind<TensorView>::throw_kind(index, "a bool scalar");
  }
};
template <typename I>
struct IntArg {
  static constexpr char code = 'i';
  static I get(const fib_value& v, int index) {
    if (v.kind == FIB_VALUE_INT || v.kind == FIB_VALUE_BOOL) return static_cast<I>(v.i);
    ArgKind<TensorView>::throw_kind(index, "an integer scalar");
  }
};
template <>
struct ArgKind<std::int64_t> : IntArg<std::int64_t> {};
template <>
struct ArgKind<std::int32_t> : IntArg<std::int32_t> {};
template <typename F>
struct FloatArg {
  static constexpr char code = 'f';
  static F get(const fib_value& v, int index) {
    if (v.kind == FIB_VALUE_FLOAT) return static_cast<F>(v.f);
    if (v.kind == FIB_VALUE_INT) return static_cast<F>(v.i);
    ArgKind<TensorView>::throw_kind(index, "a floating-point scalar");
  }
};
template <>
struct ArgKind<double> : FloatArg<double> {};
template <>
struct ArgKind<float> : FloatArg<float> {};

template <typename T>
using Bare = std::remove_cv_t<std::remove_reference_t<T>>;

template <typename R>
struct ReturnKind;  // what a function returns: nothing (DPS), one tensor, or a tuple of them
template <>
struct ReturnKind<void> {
  static constexpr int count = 0;
};
template <>
struct ReturnKind<TensorView> {
  static constexpr int count = 1;
  static void store(const TensorView& t, fib_tensor* out) { out[0] = t.raw(); }
};
template <typename... Ts>
struct ReturnKind<std::tuple<Ts...>> {
  static_assert((std::is_same_v<Bare<Ts>, TensorView> && ...),
                "a value-returning solution returns TensorViews");
  static constexpr int count = sizeof...(Ts);
  static void store(const std::tuple<Ts...>& t, fib_tensor* out) {
    std::apply(
        [out](const auto&... v) {
          int i = 0;
          ((out[i++] = v.raw()), ...);
        },
        t);
  }
};

template <typename F>
struct Signature;
template <typename R, typename... Args>
struct Signature<R (*)(Args...)> {
  using Return = R;
  static constexpr int arity = sizeof...(Args);
  // e.g. "TTT>" for a DPS function of three tensors, "TTi>T" for (T, T, int) -> T.
  static const char* text() {
    static const std::string s = [] {
      std::string r;
      ((r += ArgKind<Bare<Args>>::code), ...);
      r += '>';
      r.append(static_cast<std::size_t>(ReturnKind<R>::count), 'T');
      return r;
    }();
    return s.c_str();
  }
  template <std::size_t... I>
  static R call(R (*fn)(Args...), const fib_value* args, std::index_sequence<I...>) {
    return fn(ArgKind<Bare<Args>>::get(args[I], static_cast<int>(I))...);
  }
};

inline void set_error(fib_call* call, const char* message) {
  if (call->error == nullptr || call->error_capacity == 0) return;
  std::snprintf(call->error, call->error_capacity, "%s", message);
}

template <typename Fn>
int invoke(Fn fn, fib_call* call) {
  using Sig = Signature<Fn>;
  using R = typename Sig::Return;
  if (call->abi_version != FIB_SOLUTION_ABI_VERSION) {
    set_error(call, "fib solution ABI version mismatch: rebuild the solution");
    return 2;
  }
  if (call->num_args != Sig::arity) {
    std::string m = "the solution takes " + std::to_string(Sig::arity) + " arguments, given " +
                    std::to_string(call->num_args);
    set_error(call, m.c_str());
    return 2;
  }
  const fib_allocator* saved = current_allocator;
  void* saved_stream = current_stream;
  current_allocator = call->allocator;
  current_stream = call->stream;
  struct Restore {  // on every way out, including exceptions
    const fib_allocator* allocator;
    void* stream;
    ~Restore() {
      current_allocator = allocator;
      current_stream = stream;
    }
  } restore{saved, saved_stream};
  try {
    if constexpr (std::is_void_v<R>) {
      Sig::call(fn, call->args, std::make_index_sequence<Sig::arity>());
    } else {
      if (call->num_results < ReturnKind<R>::count) throw Error("too few result slots");
      ReturnKind<R>::store(Sig::call(fn, call->args, std::make_index_sequence<Sig::arity>()),
                           call->results);
    }
  } catch (const std::bad_alloc&) {
    set_error(call, "out of memory");
    return 1;
  } catch (const std::exception& e) {
    set_error(call, e.what());
    return 1;
  } catch (...) {
    set_error(call, "unknown exception");
    return 1;
  }
  return 0;
}

}  // namespace detail
}  // namespace fib

#if defined(_WIN32)
#define FIB_SOLUTION_API extern "C" __declspec(dllexport)
#else
#define FIB_SOLUTION_API extern "C" __attribute__((visibility("default")))
#endif

// Exports `function` as the entry symbol `symbol` (the part after "::" in entry_point), plus
// `symbol`__fib_signature, which tells the harness the parameter kinds so it can check them
// against the definition before the first call.
#define FIB_EXPORT_SOLUTION(symbol, function)                                                    \
  FIB_SOLUTION_API int symbol(fib_call* call) { return ::fib::detail::invoke(&function, call); } \
  FIB_SOLUTION_API const char* symbol##__fib_signature() {                                       \
    return ::fib::detail::Signature<decltype(&function)>::text();                                \
  }                                                                                              \
  FIB_SOLUTION_API unsigned symbol##__fib_abi_version() { return FIB_SOLUTION_ABI_VERSION; }     \
  static_assert(true, "")

#endif  // FIB_SOLUTION_C_API_ONLY

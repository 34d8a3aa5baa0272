// Shared by the worker's request handlers (bench/worker/worker_common.h).
#include "bench/worker/worker_common.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstring>

#include "fib/bench/compare.h"
#include "fib/tensor/safetensors.h"
#include "fib/trace/diagnostics.h"

namespace fib::bench::detail {

Definition parse_definition(const Json& j) {
  Diagnostics diag;
  ReadContext ctx{"request.definition", &diag};
  auto d = definition_from_json(j, ctx);
  if (!d) throw Error("request", "the definition in the request does not parse");
  return *d;
}

AxisValues parse_axes(const Json& j) {
  AxisValues v;
  for (auto it = j.begin(); it != j.end(); ++it) v.emplace_back(it.key(), it->get<std::int64_t>());
  return v;
}

// The ABI numbers dtypes as fib::DType does; the worker converts between them by value.
static_assert(static_cast<int>(DType::kFloat32) == FIB_DTYPE_FLOAT32 &&
              static_cast<int>(DType::kFloat16) == FIB_DTYPE_FLOAT16 &&
              static_cast<int>(DType::kBFloat16) == FIB_DTYPE_BFLOAT16 &&
              static_cast<int>(DType::kFloat8E4M3FN) == FIB_DTYPE_FLOAT8_E4M3FN &&
              static_cast<int>(DType::kFloat8E5M2) == FIB_DTYPE_FLOAT8_E5M2 &&
              static_cast<int>(DType::kFloat4E2M1) == FIB_DTYPE_FLOAT4_E2M1 &&
              static_cast<int>(DType::kInt64) == FIB_DTYPE_INT64 &&
              static_cast<int>(DType::kInt32) == FIB_DTYPE_INT32 &&
              static_cast<int>(DType::kInt16) == FIB_DTYPE_INT16 &&
              static_cast<int>(DType::kInt8) == FIB_DTYPE_INT8 &&
              static_cast<int>(DType::kUInt8) == FIB_DTYPE_UINT8 &&
              static_cast<int>(DType::kBool) == FIB_DTYPE_BOOL);

// A row-major view of host memory for the solution ABI.
fib_tensor contiguous_view(void* data, DType dtype, const Shape& shape, std::int32_t device_type,
                           std::int32_t device_id) {
  if (shape.size() > FIB_MAX_RANK) {
    throw Error("request", fmt::format("a tensor of rank {} exceeds the solution ABI's {}",
                                       shape.size(), FIB_MAX_RANK));
  }
  fib_tensor t{};
  t.data = data;
  t.ndim = static_cast<std::int32_t>(shape.size());
  std::int64_t stride = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    t.shape[i] = shape[static_cast<std::size_t>(i)];
    t.strides[i] = stride;
    stride *= shape[static_cast<std::size_t>(i)];
  }
  t.dtype = static_cast<std::int32_t>(dtype);
  t.device_type = device_type;
  t.device_id = device_id;
  return t;
}

Schedule parse_schedule(const Json& j) {
  Schedule s;
  s.noise.min_samples = j.value("min_samples", std::size_t{10});
  s.noise.rel_precision = j.value("rel_precision", 0.005);
  s.fixed_iterations = j.value("fixed_iterations", false);
  s.flush_caches = j.value("flush_caches", true);
  for (const Json& t : j.at("trials")) {
    TrialPlan p;
    p.warmup = t.at("warmup").get<std::vector<int>>();
    p.timed = t.at("timed").get<std::vector<int>>();
    p.check_position = t.value("check_position", -1);
    p.check_output = t.value("check_output", std::string());
    p.max_seconds = t.value("max_seconds", 0.0);
    p.max_warmup_seconds = t.value("max_warmup_seconds", 0.0);
    s.trials.push_back(std::move(p));
  }
  if (const auto it = j.find("device_pool"); it != j.end()) {
    s.device_pool.first = it->at("first").get<int>();
    s.device_pool.count = it->at("count").get<int>();
    s.device_pool.seed = it->at("seed").get<std::uint64_t>();
    if (s.device_pool.first < 1 || s.device_pool.count < 0) {
      throw Error("request.schedule.device_pool",
                  fmt::format("first {} and count {}: expected first >= 1 and count >= 0",
                              s.device_pool.first, s.device_pool.count));
    }
  }
  return s;
}

Json failure_json(const Failure& f) {
  return Json{{"kind", f.kind}, {"message", f.message}, {"call", f.call}};
}

LoadedLibrary load_library(WorkerState& st, const std::string& path, const std::string& symbol,
                           std::string* error) {
  const std::string key = path + "::" + symbol;
  if (auto it = st.libraries.find(key); it != st.libraries.end()) return it->second;
  LoadedLibrary lib;
  // RTLD_LOCAL: the solution's symbols do not interpose on fib's (a solution defining
  // clock_gettime does not change how fib reads the clock).
  lib.handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr) {
    *error = fmt::format("cannot load the solution library: {}", ::dlerror());
    return lib;
  }
  lib.entry = reinterpret_cast<fib_entry_fn>(::dlsym(lib.handle, symbol.c_str()));
  if (lib.entry == nullptr) {
    *error = fmt::format("the library does not export '{}'", symbol);
    return lib;
  }
  using VersionFn = unsigned (*)();
  using SignatureFn = const char* (*)();
  if (auto v = reinterpret_cast<VersionFn>(
          ::dlsym(lib.handle, (symbol + "__fib_abi_version").c_str()))) {
    if (v() != FIB_SOLUTION_ABI_VERSION) {
      *error = fmt::format("the solution was built for fib solution ABI {}, this fib speaks {}",
                           v(), FIB_SOLUTION_ABI_VERSION);
      lib.entry = nullptr;
      return lib;
    }
  }
  if (auto s = reinterpret_cast<SignatureFn>(
          ::dlsym(lib.handle, (symbol + "__fib_signature").c_str()))) {
    lib.signature = s();
  }
  lib.cuda_get_last_error = reinterpret_cast<int (*)()>(::dlsym(lib.handle, "cudaGetLastError"));
  lib.cuda_error_name =
      reinterpret_cast<const char* (*)(int)>(::dlsym(lib.handle, "cudaGetErrorName"));
  lib.cuda_error_string =
      reinterpret_cast<const char* (*)(int)>(::dlsym(lib.handle, "cudaGetErrorString"));
  st.libraries.emplace(key, lib);
  return lib;
}

InputSets load_sets(WorkerState& st, const Json& j) {
  const std::string path = j.get<std::string>();
  if (path != st.sets_path || !st.sets) {
    st.sets.reset();
    auto sets = std::make_shared<const std::vector<InputSet>>(read_input_sets(path));
    if (sets->empty()) throw Error(path, "no input sets");
    st.sets = std::move(sets);
    st.sets_path = path;
  }
  return st.sets;
}

fib_value scalar_value(const TensorSpec& spec,
                       const std::map<std::string, Scalar, std::less<>>& scalars) {
  fib_value v{};
  auto it = scalars.find(spec.name);
  if (it == scalars.end()) {
    v.kind = FIB_VALUE_ABSENT;
  } else if (const auto* b = std::get_if<bool>(&it->second)) {
    v.kind = FIB_VALUE_BOOL;
    v.i = *b ? 1 : 0;
  } else if (const auto* i = std::get_if<std::int64_t>(&it->second)) {
    v.kind = dtype_is_float(spec.dtype) ? FIB_VALUE_FLOAT : FIB_VALUE_INT;
    v.i = *i;
    v.f = static_cast<double>(*i);
  } else {
    v.kind = FIB_VALUE_FLOAT;
    v.f = std::get<double>(it->second);
  }
  return v;
}

Poison poison_for(DType dtype, std::uint64_t k) {
  switch (dtype) {
    case DType::kFloat32:
      return {0x7fc00000u | static_cast<std::uint32_t>((k % 0x3fffffu) + 1), 4, 0};
    case DType::kFloat16:
      return {0x7e00u | static_cast<std::uint32_t>((k % 0x1ffu) + 1), 2, 0};
    case DType::kBFloat16:
      return {0x7fc0u | static_cast<std::uint32_t>((k % 0x3fu) + 1), 2, 0};
    case DType::kFloat8E4M3FN:
      return {(k & 1) ? 0xffu : 0x7fu, 1, 0};
    case DType::kFloat8E5M2:
      return {static_cast<std::uint32_t>(0x7d + (k % 3)), 1, 0};
    case DType::kFloat4E2M1:  // no NaN in e2m1: the largest magnitudes, alternating sign
      return {(k & 1) ? 0xffu : 0x77u, 1, (k & 1) ? -6 : 6};
    case DType::kBool:
      return {(k & 1) ? 1u : 0u, 1, (k & 1) ? 1 : 0};
    default: {
      // Integers: one byte repeated; the sentinel is that pattern read as the element type.
      const std::uint8_t byte = (k & 1) ? 0xa5 : 0x5a;
      const int width = dtype_bits(dtype) / 8;
      std::uint64_t u = 0;
      for (int i = 0; i < width; ++i) u = (u << 8) | byte;
      std::int64_t sentinel = static_cast<std::int64_t>(u);
      if (width < 8) {
        const std::uint64_t sign = 1ull << (width * 8 - 1);
        sentinel = static_cast<std::int64_t>((u ^ sign) - sign);  // sign-extend
      }
      return {byte, 1, sentinel};
    }
  }
}

void write_checked_outputs(const std::string& path,
                           const std::vector<std::pair<std::string, Tensor>>& outputs) {
  SafetensorsWriteOptions scratch;
  scratch.durable = false;
  write_safetensors(path, outputs, {}, scratch);
}

void append_sampling_expectation(const Definition& def, const InputSet& in, const Json& eval_extra,
                                 std::vector<std::pair<std::string, Tensor>>* outputs) {
  if (def.op_type != "sampling") return;
  reference::Arguments args;
  args.tensors = in.tensors;
  args.scalars = in.scalars;
  ResolvedEval cfg;
  cfg.extra = eval_extra;
  SamplingExpectation e = sampling_expectation(def, args, cfg);
  outputs->emplace_back("__distribution", std::move(e.distribution));
  if (e.allowed.defined()) outputs->emplace_back("__allowed", std::move(e.allowed));
}

void write_stacked_draws(const std::string& path, const Definition& def,
                         const std::vector<std::vector<Tensor>>& per_output, int draws) {
  std::vector<std::pair<std::string, Tensor>> stacked;
  for (std::size_t i = 0; i < def.outputs.size(); ++i) {
    const Tensor& first = per_output[i].front();
    Shape s = {static_cast<std::int64_t>(draws)};
    for (std::int64_t d : first.shape()) s.push_back(d);
    Tensor t(first.dtype(), std::move(s));
    auto* dst = static_cast<std::byte*>(t.raw());
    for (const Tensor& x : per_output[i]) {
      if (x.nbytes() != first.nbytes()) continue;
      std::memcpy(dst, x.raw(), x.nbytes());
      dst += x.nbytes();
    }
    stacked.emplace_back(def.outputs[i].name, std::move(t));
  }
  write_safetensors(path, stacked);
}

}  // namespace fib::bench::detail

// The tvm-ffi call backend (bench/worker/call/tvm_ffi_backend.h).
#include "bench/worker/call/tvm_ffi_backend.h"

#include <dlfcn.h>

#ifdef FIB_HAVE_TVM_FFI
#include <fmt/format.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <array>
#include <cstring>
#include <vector>
#endif

namespace fib::bench::detail {

#ifdef FIB_HAVE_TVM_FFI
namespace {

DLDataType dl_dtype(std::int32_t dtype) {
  switch (dtype) {
    case FIB_DTYPE_FLOAT32:
      return {kDLFloat, 32, 1};
    case FIB_DTYPE_FLOAT16:
      return {kDLFloat, 16, 1};
    case FIB_DTYPE_BFLOAT16:
      return {kDLBfloat, 16, 1};
    case FIB_DTYPE_FLOAT8_E4M3FN:
      return {kDLFloat8_e4m3fn, 8, 1};
    case FIB_DTYPE_FLOAT8_E5M2:
      return {kDLFloat8_e5m2, 8, 1};
    case FIB_DTYPE_FLOAT4_E2M1:
      return {kDLFloat4_e2m1fn, 4, 1};
    case FIB_DTYPE_INT64:
      return {kDLInt, 64, 1};
    case FIB_DTYPE_INT32:
      return {kDLInt, 32, 1};
    case FIB_DTYPE_INT16:
      return {kDLInt, 16, 1};
    case FIB_DTYPE_INT8:
      return {kDLInt, 8, 1};
    case FIB_DTYPE_UINT8:
      return {kDLUInt, 8, 1};
    default:
      return {kDLBool, 8, 1};
  }
}

// libtvm_ffi's functions, as the solution's process has them.
struct TvmFfiApi {
  decltype(&TVMFFIErrorMoveFromRaised) move_from_raised = nullptr;
  decltype(&TVMFFIObjectDecRef) dec_ref = nullptr;
  decltype(&TVMFFIEnvSetStream) set_stream = nullptr;
};

class TvmFfiBackend : public CallBackend {
 public:
  TvmFfiBackend(SolutionLibrary lib, TVMFFISafeCallType entry, TvmFfiApi api)
      : lib_(std::move(lib)), entry_(entry), api_(api) {}

  std::optional<std::string> call(const CallFrame& frame) override {
    if (!frame.destination_passing) {
      return std::string(
          "unsupported: value-returning tvm-ffi solutions (destination_passing_style false) are "
          "not supported by this fib; write the outputs into the trailing arguments");
    }
    marshal(*frame.args);
    void* previous = nullptr;
    const std::int32_t device_id = cuda_device_id();
    const bool set_stream = frame.stream != nullptr && device_id >= 0;
    if (set_stream) api_.set_stream(kDLCUDA, device_id, frame.stream, &previous);
    TVMFFIAny result;
    std::memset(&result, 0, sizeof result);
    result.type_index = kTVMFFINone;
    const int rc = entry_(nullptr, args_.data(), static_cast<std::int32_t>(args_.size()), &result);
    if (set_stream) api_.set_stream(kDLCUDA, device_id, previous, nullptr);
    if (rc != 0) return raised_error(rc);
    // Destination-passing: a returned value is not an output; an object is released.
    if (result.type_index >= kTVMFFIStaticObjectBegin && result.v_obj != nullptr) {
      api_.dec_ref(result.v_obj);
    }
    return std::nullopt;
  }

  std::optional<LaunchError> take_launch_error() override { return pending_launch_error(lib_); }

 private:
  // fib_value arguments as TVMFFIAny, tensors as DLTensor* into storage kept for the call (the
  // vectors keep their capacity, so calls after the first allocate nothing).
  void marshal(const std::vector<fib_value>& in) {
    tensors_.resize(in.size());
    dims_.resize(in.size());
    args_.resize(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      const fib_value& v = in[i];
      TVMFFIAny& a = args_[i];
      std::memset(&a, 0, sizeof a);
      switch (v.kind) {
        case FIB_VALUE_TENSOR:
          a.type_index = kTVMFFIDLTensorPtr;
          a.v_ptr = dl_tensor(v.tensor, i);
          break;
        case FIB_VALUE_INT:
          a.type_index = kTVMFFIInt;
          a.v_int64 = v.i;
          break;
        case FIB_VALUE_FLOAT:
          a.type_index = kTVMFFIFloat;
          a.v_float64 = v.f;
          break;
        case FIB_VALUE_BOOL:
          a.type_index = kTVMFFIBool;
          a.v_int64 = v.i != 0 ? 1 : 0;
          break;
        default:
          a.type_index = kTVMFFINone;  // an optional input the workload does not give
          break;
      }
    }
  }

  DLTensor* dl_tensor(const fib_tensor& t, std::size_t i) {
    Dims& d = dims_[i];
    std::copy(t.shape, t.shape + t.ndim, d.shape.begin());
    std::copy(t.strides, t.strides + t.ndim, d.strides.begin());
    DLTensor& dl = tensors_[i];
    std::memset(&dl, 0, sizeof dl);
    dl.data = t.data;
    dl.device = {t.device_type == FIB_DEVICE_CUDA ? kDLCUDA : kDLCPU, t.device_id};
    dl.ndim = t.ndim;
    dl.dtype = dl_dtype(t.dtype);
    dl.shape = d.shape.data();
    dl.strides = d.strides.data();
    return &dl;
  }

  // The device of the first CUDA tensor argument (the stream is set for it), or -1.
  std::int32_t cuda_device_id() const {
    for (std::size_t i = 0; i < args_.size(); ++i) {
      if (args_[i].type_index == kTVMFFIDLTensorPtr && tensors_[i].device.device_type == kDLCUDA) {
        return tensors_[i].device.device_id;
      }
    }
    return -1;
  }

  // "ValueError: x must be float32": the error the solution raised, taken out of tvm-ffi.
  std::string raised_error(int rc) const {
    TVMFFIObjectHandle error = nullptr;
    api_.move_from_raised(&error);
    if (error == nullptr) return fmt::format("returned {}", rc);
    const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(error);
    std::string text = std::string(cell->kind.data, cell->kind.size) + ": " +
                       std::string(cell->message.data, cell->message.size);
    api_.dec_ref(error);
    return text;
  }

  struct Dims {
    std::array<std::int64_t, FIB_MAX_RANK> shape{}, strides{};
  };
  SolutionLibrary lib_;
  TVMFFISafeCallType entry_;
  TvmFfiApi api_;
  std::vector<DLTensor> tensors_;
  std::vector<Dims> dims_;
  std::vector<TVMFFIAny> args_;
};

template <typename Fn>
bool find(void* handle, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (*fn == nullptr) {
    *error = fmt::format(
        "the solution library does not reach libtvm_ffi's {} (is it linked with -ltvm_ffi?)", name);
  }
  return *fn != nullptr;
}

}  // namespace

std::unique_ptr<CallBackend> make_tvm_ffi_backend(const SolutionLibrary& lib, std::string* error) {
  TvmFfiApi api;
  if (!find(lib.handle, "TVMFFIErrorMoveFromRaised", &api.move_from_raised, error) ||
      !find(lib.handle, "TVMFFIObjectDecRef", &api.dec_ref, error) ||
      !find(lib.handle, "TVMFFIEnvSetStream", &api.set_stream, error)) {
    return nullptr;
  }
  auto entry = reinterpret_cast<TVMFFISafeCallType>(reinterpret_cast<void*>(lib.entry));
  return std::make_unique<TvmFfiBackend>(lib, entry, api);
}

#else

std::unique_ptr<CallBackend> make_tvm_ffi_backend(const SolutionLibrary&, std::string* error) {
  *error =
      "unsupported: binding 'tvm-ffi' needs the apache-tvm-ffi package, which was not found when "
      "this fib was built (scripts/install-deps.sh installs it)";
  return nullptr;
}

#endif

}  // namespace fib::bench::detail

// The tvm-ffi call backend (bench/runtime/tvm_ffi_backend.h).
#include "tvm_ffi_backend.h"

#include <dlfcn.h>

#ifdef FIB_HAVE_TVM_FFI
#include <fmt/format.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <algorithm>
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
  decltype(&TVMFFIEnvSetDLPackManagedTensorAllocator) set_allocator = nullptr;
  decltype(&TVMFFITensorFromDLPackVersioned) tensor_from_dlpack = nullptr;
};

// fib's dtype of a DLPack dtype, or -1.
std::int32_t fib_dtype(DLDataType dt) {
  for (std::int32_t d = 0; d <= FIB_DTYPE_BOOL; ++d) {
    const DLDataType x = dl_dtype(d);
    if (x.code == dt.code && x.bits == dt.bits && x.lanes == dt.lanes) return d;
  }
  return -1;
}

// Value-returning calls: tvm-ffi's environment allocator (TVMFFIEnvTensorAlloc, which
// Tensor::FromEnvAlloc uses) hands out fib::allocate's buffers, guarded and poisoned as for the
// fib ABI. The buffers stay fib's: a tensor's deleter frees only its DLPack wrapper.
thread_local const fib_allocator* current_allocator = nullptr;

struct ManagedBuffer {
  DLManagedTensorVersioned managed{};
  std::array<std::int64_t, FIB_MAX_RANK> shape{};
};

int allocate_from_fib(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                      void (*set_error)(void*, const char*, const char*)) {
  const fib_allocator* a = current_allocator;
  const std::int32_t dtype = fib_dtype(prototype->dtype);
  if (a == nullptr || dtype < 0 || prototype->ndim < 0 || prototype->ndim > FIB_MAX_RANK) {
    set_error(error_ctx, "ValueError",
              a == nullptr ? "fib's allocator is not set outside a call"
                           : "fib cannot allocate a tensor of this dtype or rank");
    return -1;
  }
  fib_tensor t{};
  if (a->allocate(a->context, dtype, prototype->shape, prototype->ndim, &t) != 0) {
    set_error(error_ctx, "RuntimeError", "fib::allocate failed (out of memory?)");
    return -1;
  }
  auto* m = new ManagedBuffer;
  std::copy(prototype->shape, prototype->shape + prototype->ndim, m->shape.begin());
  DLTensor& dl = m->managed.dl_tensor;
  dl.data = t.data;
  dl.device = {t.device_type == FIB_DEVICE_CUDA ? kDLCUDA : kDLCPU, t.device_id};
  dl.ndim = prototype->ndim;
  dl.dtype = prototype->dtype;
  dl.shape = m->shape.data();
  m->managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  m->managed.manager_ctx = m;
  m->managed.deleter = [](DLManagedTensorVersioned* self) {
    delete static_cast<ManagedBuffer*>(self->manager_ctx);
  };
  *out = &m->managed;
  return 0;
}

// A returned tensor as the fib ABI describes a result (row-major strides).
fib_tensor result_view(const DLTensor& dl) {
  fib_tensor t{};
  t.data = static_cast<char*>(dl.data) + dl.byte_offset;
  t.dtype = fib_dtype(dl.dtype);
  t.ndim = std::min<std::int32_t>(dl.ndim, FIB_MAX_RANK);
  std::copy(dl.shape, dl.shape + t.ndim, t.shape);
  t.device_type = dl.device.device_type == kDLCUDA ? FIB_DEVICE_CUDA : FIB_DEVICE_CPU;
  t.device_id = dl.device.device_id;
  return t;
}

class TvmFfiBackend : public CallBackend {
 public:
  TvmFfiBackend(SolutionLibrary lib, TVMFFISafeCallType entry, TvmFfiApi api)
      : lib_(std::move(lib)), entry_(entry), api_(api) {}

  std::optional<std::string> call(const CallFrame& frame) override {
    marshal(*frame.args);
    void* previous = nullptr;
    const std::int32_t device_id = cuda_device_id();
    const bool set_stream = frame.stream != nullptr && device_id >= 0;
    if (set_stream) api_.set_stream(kDLCUDA, device_id, frame.stream, &previous);
    DLPackManagedTensorAllocator previous_allocator = nullptr;
    if (!frame.destination_passing) {
      current_allocator = frame.allocator;
      api_.set_allocator(&allocate_from_fib, 0, &previous_allocator);
    }
    TVMFFIAny result;
    std::string raised;
    const int rc = invoke(&result, &raised);
    if (!frame.destination_passing) {
      api_.set_allocator(previous_allocator, 0, nullptr);
      current_allocator = nullptr;
    }
    if (set_stream) api_.set_stream(kDLCUDA, device_id, previous, nullptr);
    if (rc != 0) return raised;
    std::optional<std::string> error;
    frame.results->assign(frame.results->size(), fib_tensor{});
    if (!frame.destination_passing) error = take_results(result, frame.results);
    // A returned object is released (destination-passing: a return value is no output).
    if (result.type_index >= kTVMFFIStaticObjectBegin && result.v_obj != nullptr) {
      api_.dec_ref(result.v_obj);
    }
    return error;
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

  // Makes the call. Tensors go as DLTensor pointers, which TensorView parameters take; a
  // solution that rejects them for an owning ffi::Tensor parameter (before running anything) is
  // called again, and from then on, with Tensor objects over the same memory.
  int invoke(TVMFFIAny* result, std::string* raised) {
    int rc = tensor_objects_ ? call_with_tensor_objects(result) : call_with(args_, result);
    if (rc == 0) return 0;
    *raised = raised_error(rc);
    if (!tensor_objects_ &&
        raised->find("Expected `ffi.Tensor` but got `DLTensor*`") != std::string::npos) {
      tensor_objects_ = true;
      rc = call_with_tensor_objects(result);
      if (rc != 0) *raised = raised_error(rc);
    }
    return rc;
  }

  int call_with(const std::vector<TVMFFIAny>& args, TVMFFIAny* result) const {
    std::memset(result, 0, sizeof *result);
    result->type_index = kTVMFFINone;
    return entry_(nullptr, args.data(), static_cast<std::int32_t>(args.size()), result);
  }

  // Each tensor argument as a tvm-ffi Tensor object borrowing fib's buffer (its DLPack deleter
  // frees nothing), released after the call.
  int call_with_tensor_objects(TVMFFIAny* result) {
    managed_.resize(args_.size());
    object_args_ = args_;
    objects_.clear();
    int rc = 0;
    for (std::size_t i = 0; i < args_.size() && rc == 0; ++i) {
      if (args_[i].type_index != kTVMFFIDLTensorPtr) continue;
      DLManagedTensorVersioned& m = managed_[i];
      std::memset(&m, 0, sizeof m);
      m.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
      m.dl_tensor = tensors_[i];
      m.deleter = [](DLManagedTensorVersioned*) {};
      TVMFFIObjectHandle h = nullptr;
      rc = api_.tensor_from_dlpack(&m, 0, 0, &h);
      if (rc != 0) break;
      objects_.push_back(h);
      object_args_[i].type_index = kTVMFFITensor;
      object_args_[i].v_obj = static_cast<TVMFFIObject*>(h);
    }
    if (rc == 0) rc = call_with(object_args_, result);
    for (TVMFFIObjectHandle h : objects_) api_.dec_ref(h);
    return rc;
  }

  // A value-returning call's outputs: one Tensor, or an Array (a tuple) of them.
  static std::optional<std::string> take_results(const TVMFFIAny& result,
                                                 std::vector<fib_tensor>* results) {
    if (result.type_index == kTVMFFITensor) {
      (*results)[0] = result_view(*TVMFFITensorGetDLTensorPtr(result.v_obj));
      return std::nullopt;
    }
    if (result.type_index != kTVMFFIArray) {
      return fmt::format(
          "a value-returning solution must return a tensor or a tuple of tensors (type index {})",
          result.type_index);
    }
    const auto* seq = reinterpret_cast<const TVMFFISeqCell*>(
        reinterpret_cast<const char*>(result.v_obj) + sizeof(TVMFFIObject));
    const auto* items = static_cast<const TVMFFIAny*>(seq->data);
    for (std::int64_t i = 0; i < seq->size && i < static_cast<std::int64_t>(results->size()); ++i) {
      if (items[i].type_index != kTVMFFITensor) {
        return fmt::format("result #{} is not a tensor (type index {})", i + 1,
                           items[i].type_index);
      }
      (*results)[static_cast<std::size_t>(i)] =
          result_view(*TVMFFITensorGetDLTensorPtr(items[i].v_obj));
    }
    return std::nullopt;
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
  // Tensor objects instead of DLTensor pointers (see invoke).
  bool tensor_objects_ = false;
  std::vector<DLManagedTensorVersioned> managed_;
  std::vector<TVMFFIAny> object_args_;
  std::vector<TVMFFIObjectHandle> objects_;
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
      !find(lib.handle, "TVMFFIEnvSetStream", &api.set_stream, error) ||
      !find(lib.handle, "TVMFFIEnvSetDLPackManagedTensorAllocator", &api.set_allocator, error) ||
      !find(lib.handle, "TVMFFITensorFromDLPackVersioned", &api.tensor_from_dlpack, error)) {
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

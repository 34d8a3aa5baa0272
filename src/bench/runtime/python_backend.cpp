// The Python runtime's call backend (bench/runtime/python_backend.h).
#include "python_backend.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "fib/bench/builder/python_runtime.h"
#include "python_harness.h"

namespace fib::bench::detail {

namespace {

// Python's objects are opaque here: only stable-ABI functions touch them.
struct PyObject;
using Py_ssize_t = std::ptrdiff_t;
constexpr int kPyFileInput = 257;  // Py_file_input

// The stable-ABI functions fib calls, from the runtime's libpython.
struct PyApi {
  void (*initialize_ex)(int) = nullptr;
  PyObject* (*compile_string)(const char*, const char*, int) = nullptr;
  PyObject* (*exec_code_module)(const char*, PyObject*) = nullptr;
  PyObject* (*get_attr)(PyObject*, const char*) = nullptr;
  PyObject* (*call_object)(PyObject*, PyObject*) = nullptr;
  PyObject* (*tuple_new)(Py_ssize_t) = nullptr;
  int (*tuple_set)(PyObject*, Py_ssize_t, PyObject*) = nullptr;
  PyObject* (*tuple_get)(PyObject*, Py_ssize_t) = nullptr;
  PyObject* (*from_long_long)(long long) = nullptr;
  PyObject* (*from_void_ptr)(void*) = nullptr;
  PyObject* (*from_double)(double) = nullptr;
  PyObject* (*from_bool)(long) = nullptr;
  PyObject* (*from_string)(const char*) = nullptr;
  const char* (*as_utf8)(PyObject*, Py_ssize_t*) = nullptr;
  PyObject* (*capsule_new)(void*, const char*, void (*)(PyObject*)) = nullptr;
  void* (*capsule_pointer)(PyObject*, const char*) = nullptr;
  int (*capsule_valid)(PyObject*, const char*) = nullptr;
  void (*dec_ref)(PyObject*) = nullptr;
  void (*err_clear)() = nullptr;
  int (*gil_ensure)() = nullptr;
  void (*gil_release)(int) = nullptr;
  void* (*save_thread)() = nullptr;
};

// DLPack 0.x, as torch.utils.dlpack.from_dlpack takes it in a "dltensor" capsule.
struct DLDevice {
  std::int32_t device_type, device_id;
};
struct DLDataType {
  std::uint8_t code, bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
// A capsule's tensor over fib's memory: freeing it frees only this wrapper.
struct BorrowedTensor {
  DLManagedTensor managed{};
  std::int64_t shape[FIB_MAX_RANK] = {}, strides[FIB_MAX_RANK] = {};
};

// fib's formats by torch's dtype names (the harness maps returned tensors with it).
constexpr const char* kDtypeCodes =
    "float32=0,float16=1,bfloat16=2,float8_e4m3fn=3,float8_e5m2=4,float4_e2m1fn_x2=5,int64=6,"
    "int32=7,int16=8,int8=9,uint8=10,bool=11";

const PyApi* g_api = nullptr;  // for the capsule destructor

struct Interpreter {
  PyApi api;
  PyObject* harness = nullptr;
  std::string library;
};

class Gil {
 public:
  explicit Gil(const PyApi& api) : api_(api), state_(api.gil_ensure()) {}
  ~Gil() { api_.gil_release(state_); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;

 private:
  const PyApi& api_;
  int state_;
};

template <typename Fn>
bool find(void* lib, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (*fn == nullptr) *missing = name;
  return *fn != nullptr;
}

bool find_api(void* lib, PyApi* a, std::string* missing) {
  return find(lib, "Py_InitializeEx", &a->initialize_ex, missing) &&
         find(lib, "Py_CompileString", &a->compile_string, missing) &&
         find(lib, "PyImport_ExecCodeModule", &a->exec_code_module, missing) &&
         find(lib, "PyObject_GetAttrString", &a->get_attr, missing) &&
         find(lib, "PyObject_CallObject", &a->call_object, missing) &&
         find(lib, "PyTuple_New", &a->tuple_new, missing) &&
         find(lib, "PyTuple_SetItem", &a->tuple_set, missing) &&
         find(lib, "PyTuple_GetItem", &a->tuple_get, missing) &&
         find(lib, "PyLong_FromLongLong", &a->from_long_long, missing) &&
         find(lib, "PyLong_FromVoidPtr", &a->from_void_ptr, missing) &&
         find(lib, "PyFloat_FromDouble", &a->from_double, missing) &&
         find(lib, "PyBool_FromLong", &a->from_bool, missing) &&
         find(lib, "PyUnicode_FromString", &a->from_string, missing) &&
         find(lib, "PyUnicode_AsUTF8AndSize", &a->as_utf8, missing) &&
         find(lib, "PyCapsule_New", &a->capsule_new, missing) &&
         find(lib, "PyCapsule_GetPointer", &a->capsule_pointer, missing) &&
         find(lib, "PyCapsule_IsValid", &a->capsule_valid, missing) &&
         find(lib, "Py_DecRef", &a->dec_ref, missing) &&
         find(lib, "PyErr_Clear", &a->err_clear, missing) &&
         find(lib, "PyGILState_Ensure", &a->gil_ensure, missing) &&
         find(lib, "PyGILState_Release", &a->gil_release, missing) &&
         find(lib, "PyEval_SaveThread", &a->save_thread, missing);
}

// A new tuple of `items` (each reference stolen).
PyObject* tuple_of(const PyApi& a, std::initializer_list<PyObject*> items) {
  PyObject* t = a.tuple_new(static_cast<Py_ssize_t>(items.size()));
  Py_ssize_t i = 0;
  for (PyObject* item : items) a.tuple_set(t, i++, item);
  return t;
}

// Calls harness function `name` with `args` (stolen); a new reference, or null.
PyObject* call_harness(const Interpreter& in, const char* name, PyObject* args) {
  PyObject* fn = in.api.get_attr(in.harness, name);
  PyObject* result = fn != nullptr ? in.api.call_object(fn, args) : nullptr;
  if (fn != nullptr) in.api.dec_ref(fn);
  in.api.dec_ref(args);
  if (result == nullptr) in.api.err_clear();
  return result;
}

std::string text_of(const PyApi& a, PyObject* s) {
  Py_ssize_t n = 0;
  const char* p = s != nullptr ? a.as_utf8(s, &n) : nullptr;
  if (p == nullptr) {
    a.err_clear();
    return {};
  }
  return std::string(p, static_cast<std::size_t>(n));
}

// Starts the interpreter of the runtime `python` describes: its libpython, its home and its
// sys.path, and the harness module. One runtime per process.
bool start(Interpreter* in, const Json& python, std::string* error) {
  const PythonRuntime rt = python_runtime_from_json(python);
  void* lib = ::dlopen(rt.library.c_str(), RTLD_NOW | RTLD_GLOBAL);  // extensions resolve Py*
  if (lib == nullptr) {
    *error = fmt::format("cannot load libpython of {}: {}", rt.describe(), ::dlerror());
    return false;
  }
  std::string missing;
  if (!find_api(lib, &in->api, &missing)) {
    *error = fmt::format("{} does not export {}", rt.library, missing);
    return false;
  }
  in->library = rt.library;
  const PyApi& a = in->api;
  // The runtime's own prefixes: an embedded interpreter would otherwise look for its standard
  // library beside whichever python3 comes first on PATH.
  ::setenv("PYTHONHOME", rt.home.c_str(), 1);
  a.initialize_ex(0);  // 0: fib's signal handlers stay
  PyObject* code = a.compile_string(kPythonHarness, "<fib harness>", kPyFileInput);
  in->harness = code != nullptr ? a.exec_code_module("_fib_harness", code) : nullptr;
  if (code != nullptr) a.dec_ref(code);
  std::ostringstream path;
  for (const auto& p : rt.path) path << p << '\n';
  PyObject* done = in->harness == nullptr
                       ? nullptr
                       : call_harness(*in, "setup",
                                      tuple_of(a, {a.from_string(path.str().c_str()),
                                                   a.from_string(rt.executable.c_str()),
                                                   a.from_string(kDtypeCodes)}));
  if (done == nullptr) {
    a.err_clear();
    *error = fmt::format("the embedded {} could not start fib's harness", rt.describe());
    return false;
  }
  a.dec_ref(done);
  g_api = &in->api;
  a.save_thread();  // the GIL is taken per call, by whichever thread makes it
  return true;
}

Interpreter* interpreter(const Json& python, std::string* error) {
  static std::mutex mu;
  static Interpreter* in = nullptr;
  static std::string failed;
  std::lock_guard<std::mutex> lock(mu);
  if (in == nullptr && failed.empty()) {
    auto fresh = std::make_unique<Interpreter>();
    if (start(fresh.get(), python, &failed)) in = fresh.release();
  }
  if (in == nullptr) {
    *error = failed;
    return nullptr;
  }
  const std::string wanted = python_runtime_from_json(python).library;
  if (wanted != in->library) {
    *error = fmt::format("this worker embeds {} already and cannot load {}", in->library, wanted);
    return nullptr;
  }
  return in;
}

void release_capsule(PyObject* capsule) {
  // torch renames a capsule it took ("used_dltensor") and frees the tensor itself.
  if (g_api == nullptr || !g_api->capsule_valid(capsule, "dltensor")) return;
  auto* m = static_cast<DLManagedTensor*>(g_api->capsule_pointer(capsule, "dltensor"));
  if (m != nullptr) m->deleter(m);
}

// A "dltensor" capsule over `t`, and the harness's view of it ("t", or "t:<torch dtype>" where
// DLPack has no code torch 1.13 takes: fp8, fp4 and bool go as bytes and are viewed).
PyObject* capsule_of(const PyApi& a, const fib_tensor& t, const char** view) {
  auto* b = new BorrowedTensor;
  DLTensor& dl = b->managed.dl_tensor;
  dl.data = t.data;
  dl.device = {t.device_type == FIB_DEVICE_CUDA ? 2 : 1, t.device_id};
  dl.ndim = t.ndim;
  std::copy(t.shape, t.shape + t.ndim, b->shape);
  std::copy(t.strides, t.strides + t.ndim, b->strides);
  *view = "t";
  switch (t.dtype) {
    case FIB_DTYPE_FLOAT32:
      dl.dtype = {2, 32, 1};
      break;
    case FIB_DTYPE_FLOAT16:
      dl.dtype = {2, 16, 1};
      break;
    case FIB_DTYPE_BFLOAT16:
      dl.dtype = {4, 16, 1};
      break;
    case FIB_DTYPE_INT64:
      dl.dtype = {0, 64, 1};
      break;
    case FIB_DTYPE_INT32:
      dl.dtype = {0, 32, 1};
      break;
    case FIB_DTYPE_INT16:
      dl.dtype = {0, 16, 1};
      break;
    case FIB_DTYPE_INT8:
      dl.dtype = {0, 8, 1};
      break;
    case FIB_DTYPE_UINT8:
      dl.dtype = {1, 8, 1};
      break;
    case FIB_DTYPE_FLOAT8_E4M3FN:
      dl.dtype = {1, 8, 1};
      *view = "t:float8_e4m3fn";
      break;
    case FIB_DTYPE_FLOAT8_E5M2:
      dl.dtype = {1, 8, 1};
      *view = "t:float8_e5m2";
      break;
    case FIB_DTYPE_BOOL:
      dl.dtype = {1, 8, 1};
      *view = "t:bool";
      break;
    default:  // fp4, two to a byte: bytes of half the last dimension, row-major
      dl.dtype = {1, 8, 1};
      *view = "t:float4_e2m1fn_x2";
      if (t.ndim > 0) b->shape[t.ndim - 1] = (b->shape[t.ndim - 1] + 1) / 2;
      for (std::int64_t i = t.ndim - 1, step = 1; i >= 0; --i) {
        b->strides[i] = step;
        step *= b->shape[i];
      }
      break;
  }
  dl.shape = b->shape;
  dl.strides = b->strides;
  b->managed.manager_ctx = b;
  b->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<BorrowedTensor*>(self->manager_ctx);
  };
  return a.capsule_new(&b->managed, "dltensor", &release_capsule);
}

}  // namespace

namespace {

// fib_tensor of a returned tensor's format, "<fib dtype>:<d0>,<d1>,...".
std::optional<std::pair<std::int32_t, std::vector<std::int64_t>>> parse_format(
    const std::string& f) {
  const auto colon = f.find(':');
  if (colon == std::string::npos) return std::nullopt;
  std::vector<std::int64_t> shape;
  std::stringstream dims(f.substr(colon + 1));
  for (std::string d; std::getline(dims, d, ',');) shape.push_back(std::stoll(d));
  return std::make_pair(static_cast<std::int32_t>(std::stoi(f.substr(0, colon))), shape);
}

class PythonBackend : public CallBackend {
 public:
  PythonBackend(Interpreter& in, long long function) : in_(in), function_(function) {}

  std::optional<std::string> call(const CallFrame& frame) override {
    const PyApi& a = in_.api;
    Gil gil(a);
    std::string views;
    std::int32_t device = -1;
    PyObject* args = arguments(*frame.args, &views, &device);
    PyObject* pointer = a.from_void_ptr(device >= 0 ? frame.stream : nullptr);
    PyObject* reply =
        call_harness(in_, "call",
                     tuple_of(a, {a.from_long_long(function_), args, a.from_string(views.c_str()),
                                  a.from_bool(frame.destination_passing ? 1 : 0), pointer,
                                  a.from_long_long(device < 0 ? 0 : device)}));
    const std::string text = text_of(a, reply);
    if (reply != nullptr) a.dec_ref(reply);
    if (text.empty()) return std::string("fib's Python harness failed to make the call");
    if (text[0] == 'E') return "the solution raised an exception:\n" + text.substr(1);
    frame.results->assign(frame.results->size(), fib_tensor{});
    if (frame.destination_passing) return std::nullopt;
    return take_results(frame, text.substr(1), device >= 0 ? frame.stream : nullptr, device);
  }

 private:
  // The call's arguments as a tuple: capsules for tensors, Python scalars, 0 for an absent
  // input (the harness passes None); `views` says which is which.
  PyObject* arguments(const std::vector<fib_value>& in, std::string* views, std::int32_t* device) {
    const PyApi& a = in_.api;
    PyObject* t = a.tuple_new(static_cast<Py_ssize_t>(in.size()));
    for (std::size_t i = 0; i < in.size(); ++i) {
      const fib_value& v = in[i];
      const char* view = "s";
      PyObject* item = nullptr;
      switch (v.kind) {
        case FIB_VALUE_TENSOR:
          item = capsule_of(a, v.tensor, &view);
          if (v.tensor.device_type == FIB_DEVICE_CUDA && *device < 0) *device = v.tensor.device_id;
          break;
        case FIB_VALUE_INT:
          item = a.from_long_long(v.i);
          break;
        case FIB_VALUE_FLOAT:
          item = a.from_double(v.f);
          break;
        case FIB_VALUE_BOOL:
          item = a.from_bool(v.i != 0 ? 1 : 0);
          break;
        default:
          item = a.from_long_long(0);
          view = "n";
          break;
      }
      a.tuple_set(t, static_cast<Py_ssize_t>(i), item);
      if (i > 0) *views += ',';
      *views += view;
    }
    return t;
  }

  // Value-returning: one fib::allocate buffer per returned tensor, the tensors copied into them
  // (on the call's stream), and the buffers as the call's results.
  std::optional<std::string> take_results(const CallFrame& frame, const std::string& formats,
                                          void* stream, std::int32_t device) {
    const PyApi& a = in_.api;
    std::vector<std::string> items;
    std::stringstream ss(formats);
    for (std::string f; std::getline(ss, f, ';');) items.push_back(f);
    const std::size_t outputs = frame.results->size() - 1;
    if (items.size() != outputs) {
      return fmt::format("the solution returned {} tensors; the definition has {} outputs",
                         items.size(), outputs);
    }
    PyObject* capsules = a.tuple_new(static_cast<Py_ssize_t>(items.size()));
    std::string views;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto format = parse_format(items[i]);
      fib_tensor& t = (*frame.results)[i];
      if (!format || format->second.size() > FIB_MAX_RANK ||
          frame.allocator->allocate(frame.allocator->context, format->first, format->second.data(),
                                    static_cast<std::int32_t>(format->second.size()), &t) != 0) {
        a.dec_ref(capsules);
        return fmt::format("fib::allocate cannot hold result #{} ({})", i + 1, items[i]);
      }
      const char* view = "t";
      a.tuple_set(capsules, static_cast<Py_ssize_t>(i), capsule_of(a, t, &view));
      if (i > 0) views += ',';
      views += view;
    }
    PyObject* reply =
        call_harness(in_, "copy_out",
                     tuple_of(a, {capsules, a.from_string(views.c_str()), a.from_void_ptr(stream),
                                  a.from_long_long(device < 0 ? 0 : device)}));
    const std::string text = text_of(a, reply);
    if (reply != nullptr) a.dec_ref(reply);
    if (reply == nullptr) return std::string("fib's Python harness failed to copy the results");
    if (!text.empty()) return "copying the returned tensors into fib's outputs failed:\n" + text;
    return std::nullopt;
  }

  Interpreter& in_;
  long long function_;
};

}  // namespace

std::unique_ptr<CallBackend> make_python_backend(const std::string& file,
                                                 const std::string& function,
                                                 const std::string& binding, const Json& python,
                                                 std::string* error) {
  Interpreter* in = nullptr;
  try {
    in = interpreter(python, error);
  } catch (const std::exception& e) {
    *error = fmt::format("the request's Python runtime is unusable: {}", e.what());
    return nullptr;
  }
  if (in == nullptr) return nullptr;
  const PyApi& a = in->api;
  Gil gil(a);
  PyObject* reply =
      call_harness(*in, "load",
                   tuple_of(a, {a.from_string(file.c_str()), a.from_string(function.c_str()),
                                a.from_string(binding.c_str())}));
  const std::string text = text_of(a, reply);
  if (reply != nullptr) a.dec_ref(reply);
  if (text.empty() || text[0] != '#') {
    *error = "the solution's module did not load:\n" +
             (text.empty() ? std::string("fib's Python harness failed") : text);
    return nullptr;
  }
  return std::make_unique<PythonBackend>(*in, std::stoll(text.substr(1)));
}

}  // namespace fib::bench::detail

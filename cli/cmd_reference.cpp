// fib reference: run a definition's native reference on inputs from a safetensors file (as
// `fib inputs` writes them) and write the outputs. --device picks the CPU reference or, in a
// CUDA build, the CUDA reference on one GPU; --time times the reference (the CPU one with
// steady_clock, the CUDA one with fib's GPU timer) and --json prints one JSON object for scripts
// (scripts/device/ref_vs_torch.py).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/base/device.h"
#include "fib/bench/timing/timing.h"
#include "fib/reference/reference.h"
#include "fib/tensor/safetensors.h"

#ifdef FIB_HAVE_CUDA
#include "fib/cuda/timing.h"
#include "fib/reference_cuda/reference_cuda.h"
#endif

namespace fib::cli {

namespace {
struct ReferenceArgs {
  std::string dataset, definition, inputs, output, device = "cpu", mode = "events";
  unsigned threads = 0;
  std::uint64_t seed = 0;
  bool time = false, json = false;
  int warmup = 3;
  std::size_t iterations = 100;
  double max_seconds = 1.0;
};

// --device: "cpu", "cuda" (device 0) or "cuda:N".
Device device_flag(const std::string& s) {
  if (const auto d = parse_device(s)) return *d;
  throw Error("--device", fmt::format("unknown device '{}'", s), "expected cpu, cuda or cuda:N");
}

struct LoadedInputs {
  reference::Arguments args;
  AxisValues var;
};

LoadedInputs load_inputs(const Definition& def, const std::string& path) {
  LoadedInputs in;
  const auto file = SafetensorsFile::open(path);
  for (const auto& key : file.keys()) in.args.tensors.emplace(key, file.read(key));
  for (const auto& [k, v] : file.header().metadata) {
    if (k.rfind("fib.scalar.", 0) != 0) continue;
    const Json j = Json::parse(v);
    Scalar s = j.is_boolean()          ? Scalar{j.get<bool>()}
               : j.is_number_integer() ? Scalar{j.get<std::int64_t>()}
                                       : Scalar{j.get<double>()};
    in.args.scalars.emplace(k.substr(11), s);
  }
  // Var axes come from the input shapes the definition names them in.
  for (const auto& name : def.var_axes()) {
    for (const auto& spec : def.inputs) {
      if (!spec.shape) continue;
      auto it = in.args.tensors.find(spec.name);
      if (it == in.args.tensors.end()) continue;
      for (std::size_t i = 0; i < spec.shape->size() && i < it->second.rank(); ++i) {
        if ((*spec.shape)[i] == name && !axis_value(in.var, name))
          in.var.emplace_back(name, it->second.dim(i));
      }
    }
    if (!axis_value(in.var, name)) {
      throw Error(path, fmt::format("cannot tell var axis '{}' from the inputs' shapes", name));
    }
  }
  return in;
}

void write_outputs(const ReferenceArgs& a, const Definition& def, std::string_view kernel_id,
                   const reference::Outputs& out) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& spec : def.outputs) tensors.emplace_back(spec.name, out.at(spec.name));
  write_safetensors(a.output, tensors,
                    {{"fib.definition", def.name}, {"fib.reference", std::string(kernel_id)}});
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// What --time measured, for the text line and the JSON object.
struct Timed {
  bench::SampleStats stats;
  std::vector<double> samples_ms;
  std::string how;  // one line: clock or mode, flush, warmup, stop reason
  Json method;
  Json kernels;  // CUPTI mode: the kernels of one call (name, stream, start, duration)
};

std::string timed_line(const std::string& def, std::string_view kernel, const std::string& device,
                       const Timed& t) {
  return fmt::format(
      "{}: timed {} on {}: median {:.4f} ms, p10 {:.4f} ms, p90 {:.4f} ms, {} samples ({})\n", def,
      kernel, device, t.stats.median, t.stats.p10, t.stats.p90, t.stats.count, t.how);
}

Json result_json(const ReferenceArgs& a, const Definition& def, std::string_view kernel,
                 const Device& dev, const std::string& device_name, double run_ms,
                 const AxisValues& var, const std::optional<Timed>& timed) {
  Json axes = Json::object();
  for (const auto& [name, value] : var) axes[name] = value;
  Json j{{"definition", def.name},
         {"kernel", std::string(kernel)},
         {"device", dev.to_string()},
         {"device_name", device_name},
         {"axes", axes},
         {"output", a.output},
         {"run_ms", run_ms}};
  if (timed) {
    Json t = bench::stats_to_json(timed->stats);
    t["samples_ms"] = timed->samples_ms;
    t["method"] = timed->method;
    if (!timed->kernels.is_null()) t["kernels"] = timed->kernels;
    j["timing"] = t;
  }
  return j;
}

// The CPU reference; --time repeats it (median of steady_clock wall times).
int run_on_cpu(const ReferenceArgs& a, const Definition& def) {
  std::string why;
  const reference::Kernel* k = reference::find_kernel(def, &why);
  if (!k) throw Error(def.name, why);
  const LoadedInputs in = load_inputs(def, a.inputs);
  const auto t0 = std::chrono::steady_clock::now();
  const reference::Outputs out = reference::run(def, in.var, in.args, a.threads, a.seed);
  const double ms = ms_since(t0);
  write_outputs(a, def, k->id(), out);
  std::optional<Timed> timed;
  if (a.time) {
    // The run above was the first warmup call (lazy initialization, page faults of fresh
    // outputs); the rest are untimed too. Sampling stops at the noise criterion fib run uses,
    // or at a cap.
    for (int i = 1; i < a.warmup; ++i)
      (void)reference::run(def, in.var, in.args, a.threads, a.seed);
    Timed t;
    const bench::NoiseCriterion noise;
    const auto start = std::chrono::steady_clock::now();
    std::string stop = "iterations";
    while (t.samples_ms.size() < a.iterations) {
      const auto c0 = std::chrono::steady_clock::now();
      (void)reference::run(def, in.var, in.args, a.threads, a.seed);
      t.samples_ms.push_back(ms_since(c0));
      if (bench::precise_enough(t.samples_ms, noise)) {
        stop = "noise";
        break;
      }
      if (t.samples_ms.size() < a.iterations && ms_since(start) >= a.max_seconds * 1e3) {
        stop = "time";
        break;
      }
    }
    t.stats = bench::summarize(t.samples_ms);
    const int warmup = std::max(1, a.warmup);
    t.how = fmt::format("steady_clock, warmup {}, stop: {}", warmup, stop);
    t.method = Json{{"clock", "steady_clock"},
                    {"warmup", warmup},
                    {"threads", a.threads},
                    {"stop", stop},
                    {"iterations", t.samples_ms.size()}};
    timed = std::move(t);
  }
  if (a.json) {
    std::cout << result_json(a, def, k->id(), Device::cpu(), "cpu", ms, in.var, timed).dump(2)
              << "\n";
    return kExitOk;
  }
  std::cout << fmt::format("{}: native reference {} on cpu in {:.2f} ms; wrote {}\n", def.name,
                           k->id(), ms, a.output);
  if (timed) std::cout << timed_line(def.name, k->id(), "cpu", *timed);
  return kExitOk;
}

#ifdef FIB_HAVE_CUDA
// Which GPU: the device must exist (a clear error on a machine without a GPU or driver, as CI's).
void require_device(const Device& dev) {
  std::string why;
  const int n = cuda::device_count(&why);
  if (n == 0) {
    throw Error("--device", fmt::format("no CUDA device for '{}': {}", dev.to_string(), why),
                "run on a machine with an NVIDIA GPU and driver, or use --device cpu");
  }
  if (dev.ordinal >= n) {
    throw Error(
        "--device",
        fmt::format("no CUDA device {}: {} visible (cuda:0 to cuda:{})", dev.to_string(),
                    n == 1 ? std::string("1 device is") : fmt::format("{} devices are", n), n - 1),
        "pick one of them, or set CUDA_VISIBLE_DEVICES");
  }
}

// The CUDA reference on device `dev`; --time measures it with fib::cuda::Timer (events mode: L2
// flush before each call, blocking kernel, warmup, noise stop), as fib run times a solution.
int run_on_cuda(const ReferenceArgs& a, const Definition& def, const Device& dev) {
  cuda::set_device(dev.ordinal);
  const cuda::DeviceInfo info = cuda::device_info(dev.ordinal);
  std::string why;
  const reference_cuda::Kernel* k = reference_cuda::find_kernel(def, &why);
  if (!k) throw Error(def.name, "no CUDA reference: " + why);
  const LoadedInputs in = load_inputs(def, a.inputs);
  cuda::Stream stream;
  reference_cuda::DeviceArguments dargs;
  for (const auto& [name, t] : in.args.tensors)
    dargs.tensors.emplace(name, cuda::to_device(t, stream.get()));
  dargs.scalars = in.args.scalars;
  // With --time, freed device memory is kept for reuse from here on (why: below), so the first
  // call's outputs serve the timed calls.
  if (a.time) cuda::enable_allocation_cache();
  // The first call, timed on the host around the enqueue and a synchronize (inputs already on
  // the device; it includes module load and lazy initialization).
  const auto t0 = std::chrono::steady_clock::now();
  reference_cuda::DeviceOutputs dout =
      reference_cuda::run(def, in.var, dargs, stream.get(), a.seed);
  stream.synchronize();
  const double ms = ms_since(t0);
  reference::Outputs out;
  for (const auto& [name, t] : dout) out.emplace(name, cuda::to_host(t, stream.get()));
  dout.clear();
  write_outputs(a, def, k->id(), out);

  std::optional<Timed> timed;
  if (a.time) {
    // Each call allocates its outputs. Timed calls take them from the allocation cache, as fib
    // run's worker does (and as PyTorch's caching allocator does for the PyTorch reference): a
    // fresh cudaMalloc maps new pages, which the device waits for inside the timed interval
    // (about 50 us for mamba_ssu's 537 MB new_state on an H100), and cudaFree waits for the whole
    // device, which would stall behind the timer's blocking kernel. Every call runs on this one
    // stream, so a buffer reused by the next call is written only after this call's kernels.
    cuda::TimingOptions o;
    o.mode = a.mode == "cupti"   ? cuda::TimingMode::kCupti
             : a.mode == "graph" ? cuda::TimingMode::kGraph
                                 : cuda::TimingMode::kEvents;
    o.warmup = a.warmup;
    o.max_iterations = a.iterations;
    o.max_seconds = a.max_seconds;
    const bench::NoiseCriterion noise;
    o.stop = [&](std::span<const double> s) { return bench::precise_enough(s, noise); };
    cuda::Timer timer(dev.ordinal, stream.get(), o);
    const cuda::Call call = [&](cudaStream_t s) {
      (void)reference_cuda::run(def, in.var, dargs, s, a.seed);
    };
    cuda::TimingResult r = timer.measure(call);
    if (!r.method.blocking_kernel && !r.method.blocking_note.empty()) {
      // The call waits on the device (a reference that copies counts to the host, as the MoE
      // one does): the timer found that out only after its blocking kernel had waited its full
      // timeout, which used up the sampling time. Measured again without it, from the start,
      // keeping the note that says why.
      const std::string note = r.method.blocking_note;
      timer.options().blocking_kernel = false;
      r = timer.measure(call);
      r.method.blocking_note = note;
    }
    Timed t;
    t.samples_ms = r.samples_ms;
    t.stats = bench::summarize(r.samples_ms);
    const cuda::TimingMethod& m = r.method;
    t.how = fmt::format("{}, L2 flush {} MiB, warmup {}, {}, stop: {}",
                        cuda::timing_mode_name(m.mode), m.flush_bytes >> 20, m.warmup,
                        m.blocking_kernel ? "blocking kernel" : "no blocking kernel",
                        cuda::stop_reason_name(m.stop));
    t.method = cuda::to_json(m);
    if (!r.kernels.empty()) t.kernels = cuda::to_json(r).at("kernels");
    timed = std::move(t);
    if (!a.json && !m.blocking_note.empty()) {
      std::cout << fmt::format("{}: note: {}\n", def.name, m.blocking_note);
    }
  }
  if (a.json) {
    std::cout << result_json(a, def, k->id(), dev, info.name, ms, in.var, timed).dump(2) << "\n";
    return kExitOk;
  }
  std::cout << fmt::format("{}: CUDA reference {} on {} ({}) in {:.2f} ms; wrote {}\n", def.name,
                           k->id(), dev.to_string(), info.name, ms, a.output);
  if (timed) std::cout << timed_line(def.name, k->id(), dev.to_string(), *timed);
  return kExitOk;
}
#endif

int run_reference_cmd(const ReferenceArgs& a) {
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string*>{"--definition", &a.definition},
        {"--inputs", &a.inputs},
        {"--output", &a.output}}) {
    if (value->empty()) {
      throw Error(flag, fmt::format("{} is required", flag),
                  "fib reference --definition NAME --inputs IN --output OUT, or fib reference "
                  "check");
    }
  }
  const Device dev = device_flag(a.device);
  if (a.iterations == 0) throw Error("--iterations", "must be at least 1");
  if (a.mode != "events" && a.mode != "cupti" && a.mode != "graph") {
    throw Error("--mode", fmt::format("unknown timing mode '{}'", a.mode),
                "expected events, cupti or graph");
  }
#ifdef FIB_HAVE_CUDA
  if (dev.is_cuda()) require_device(dev);
#else
  if (dev.is_cuda()) {
    throw Error("--device", fmt::format("device '{}' is not available in this build", a.device),
                "CUDA references need a CUDA build of fib; use --device cpu");
  }
#endif
  const TraceSet set = TraceSet::load(dataset_path(a.dataset));
  const Definition& def = find_definition(set, a.definition);
#ifdef FIB_HAVE_CUDA
  if (dev.is_cuda()) return run_on_cuda(a, def, dev);
#endif
  return run_on_cpu(a, def);
}
}  // namespace

void register_reference(CLI::App& app, Runner& run) {
  auto a = std::make_shared<ReferenceArgs>();
  CLI::App* cmd =
      app.add_subcommand("reference",
                         "Run a definition's native reference on saved inputs; `check`: against "
                         "its PyTorch reference");
  add_dataset_option(cmd, a->dataset);
  // Required unless the `check` subcommand runs instead (checked in run_reference_cmd).
  cmd->add_option("--definition", a->definition, "Definition name (required)");
  cmd->add_option("--inputs", a->inputs, "Inputs .safetensors (as fib inputs writes it; required)");
  cmd->add_option("--output", a->output, "Output .safetensors file (required)");
#ifdef FIB_HAVE_CUDA
  cmd->add_option("--device", a->device, "cpu, cuda or cuda:N (the CUDA reference on GPU N)");
#else
  cmd->add_option("--device", a->device, "cpu (cuda needs a CUDA build of fib)");
#endif
  cmd->add_option("--threads", a->threads, "CPU threads (default: all cores)");
  cmd->add_option("--seed", a->seed, "Seed of sampling references");
  cmd->add_flag("--time", a->time,
                "Also time the reference: cpu with steady_clock, cuda with the GPU timer (events, "
                "L2 flush, blocking kernel); median, p10, p90 of the samples");
  cmd->add_option("--warmup", a->warmup, "--time: untimed calls first (default 3, at least 1)");
  cmd->add_option("--iterations", a->iterations, "--time: most samples (default 100)");
  cmd->add_option("--mode", a->mode,
                  "--time on cuda: events (default), cupti (kernel durations, each kernel listed "
                  "with --json) or graph (the call captured into a CUDA graph)");
  cmd->add_option("--max-seconds", a->max_seconds,
                  "--time: stop sampling after this long (default 1)");
  cmd->add_flag("--json", a->json, "Print one JSON object (kernel, axes, timing) instead of text");
  cmd->callback([&run, a, cmd] {
    if (cmd->get_subcommands().empty()) run = [a] { return run_reference_cmd(*a); };
  });
  register_reference_check(*cmd, run);
}

}  // namespace fib::cli

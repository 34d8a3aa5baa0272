// A target's trials under the GPU timer (bench/worker/gpu_trials.h).
#ifdef FIB_HAVE_CUDA

#include "gpu_trials.h"

#include <fmt/format.h>

#include <algorithm>

#include "fib/bench/timing/timing.h"

namespace fib::bench::detail {

namespace cu = fib::cuda;

namespace {

std::string stop_name(cu::StopReason r) {
  switch (r) {
    case cu::StopReason::kNoise:
      return "noise";
    case cu::StopReason::kTimeCap:
      return "time_cap";
    case cu::StopReason::kIterationCap:
      return "iterations";
  }
  return "iterations";
}

Json timing_json(const cu::TimingResult& r) {
  Json j = cu::to_json(r);
  j.erase("samples_ms");  // the trial's samples_ms holds them
  return j;
}

}  // namespace

CallOrder order_of(const TrialPlan& plan, bool first_trial) {
  CallOrder o;
  o.warmup = plan.warmup;
  o.timed = plan.timed;
  if (plan.check_position >= 0 && plan.check_position < static_cast<int>(plan.timed.size())) {
    o.check_set = plan.timed[static_cast<std::size_t>(plan.check_position)];
  }
  o.warm = !first_trial;
  if (o.warmup.empty() && !o.warm) {
    for (int s : o.timed) {
      if (s != o.check_set) {
        o.warmup.push_back(s);
        break;
      }
    }
    if (o.warmup.empty()) o.warmup.push_back(o.timed.front());
  }
  return o;
}

cu::TimingOptions timing_options(const Schedule& s, const TrialPlan& plan, const CallOrder& order,
                                 const std::string& timer) {
  const std::optional<cu::TimingOptions> named = cu::gpu_timer_options(timer);
  if (!named) throw Error("request.gpu_timing.timer", fmt::format("unknown GPU timer '{}'", timer));
  cu::TimingOptions o = *named;
  o.warmup = static_cast<int>(order.warmup.size());
  o.warm = order.warm;
  o.max_warmup_seconds = plan.max_warmup_seconds;
  o.max_iterations = plan.timed.size();
  o.max_seconds = plan.max_seconds > 0 ? plan.max_seconds : 1e9;
  o.l2_flush = s.flush_caches;
  const std::size_t must_reach =
      std::max<std::size_t>(s.noise.min_samples, static_cast<std::size_t>(plan.check_position + 1));
  if (!s.fixed_iterations) {
    const NoiseCriterion noise = s.noise;
    o.stop = [noise, must_reach](std::span<const double> samples) {
      return samples.size() >= must_reach && precise_enough(samples, noise);
    };
  }
  return o;
}

protocol::TrialResult trial_result(const cu::TimingResult& r,
                                   std::optional<protocol::CheckedCall> checked) {
  protocol::TrialResult t;
  t.samples_ms = r.samples_ms;
  t.warmup_ms = 1000.0 * r.method.warmup_seconds;
  t.warmup_calls = r.method.warmup;
  t.stopped_by = stop_name(r.method.stop);
  t.checked = std::move(checked);
  t.gpu = timing_json(r);
  return t;
}

Failure cuda_failure(const cu::CudaError& e, std::uint64_t call, WorkerState& st) {
  Failure f;
  f.kind = "cuda_error";
  f.call = call;
  f.message = e.what();
  if (dynamic_cast<const cu::StickyError*>(&e) != nullptr) {
    st.exit_after_reply = true;
    f.message += " (a sticky error: the CUDA context is unusable, the worker is replaced)";
  }
  return f;
}

cu::TimingResult DeviceRunner::measure_trial(const Schedule& s, const TrialPlan& plan,
                                             bool first_trial, const std::string& timer) {
  order_ = order_of(plan, first_trial);
  target_.begin_trial();
  staged_done_ = false;
  restage_ = false;
  check_position_ = plan.check_position;
  check_wanted_ = !plan.check_output.empty();
  cu::TimingOptions opts = timing_options(s, plan, *order_, timer);
  const bool known_to_wait = *call_waits_ && opts.blocking_kernel;
  if (known_to_wait) opts.blocking_kernel = false;
  opts.before_call = [this](cudaStream_t, std::size_t i) { before(i); };
  opts.after_call = [this](cudaStream_t, std::size_t) { after(); };
  opts.rewound = [this](std::size_t index) { rewound(index); };
  g_.timer().options() = opts;
  cu::TimingResult result = g_.timer().measure([this](cudaStream_t) { call(); });
  if (known_to_wait) {
    result.method.blocking_note =
        "not used: an earlier measurement of this call found that it waits on the device (it "
        "synchronizes or copies to the host), so its launches cannot be queued ahead; sampled "
        "without the blocking kernel (launch latency included)";
  } else if (opts.blocking_kernel && !result.method.blocking_kernel) {
    *call_waits_ = true;
  }
  if (!staged_done_ && check_wanted_ && plan.check_position >= 0) {
    before(order_->warmup.size() + static_cast<std::size_t>(plan.check_position));
    call();
    after();
  }
  return result;
}

cu::WindowAudit DeviceRunner::audit_window(const TrialPlan& first, std::size_t calls) {
  order_.reset();
  if (*call_waits_) g_.timer().options().blocking_kernel = false;
  g_.timer().options().before_call = [this, &first](cudaStream_t, std::size_t i) {
    current_set_ = first.timed[i % first.timed.size()];
    before(i);
  };
  g_.timer().options().after_call = [this](cudaStream_t, std::size_t) { after(); };
  return g_.timer().audit_window([this](cudaStream_t) { call(); }, calls);
}

void DeviceRunner::before(std::size_t i) {
  current_index_ = i;
  if (order_) current_set_ = order_->set_for(i);
  target_.prepare(current_set_, call_number_, /*flush=*/false);  // the timer flushes the L2
}

void DeviceRunner::call() {
  Failure f;
  if (!target_.call(call_number_, &f)) throw CallFailed(std::move(f));
}

void DeviceRunner::after() {
  Failure f;
  if (!target_.verify(call_number_, &f)) throw CallFailed(std::move(f));
  // A timed call (the timer counts warmup calls first) may become the trial's checked one: its
  // outputs are copied aside on the stream before any later call is queued.
  if (order_ && check_wanted_ && current_index_ >= order_->warmup.size()) {
    const std::size_t position = current_index_ - order_->warmup.size();
    if (checked_call_kept(check_position_, position) || restage_) {
      restage_ = false;
      target_.stage_checked();
      staged_done_ = true;
      staged_call_ = call_number_;
      staged_poison_ = target_.poison();
      staged_position_ = static_cast<int>(position);
    }
  }
  ++call_number_;
}

// The timer redoes the calls from `index` on. A checked call staged among the dropped ones is
// not a sample of the trial: with a position the plan names, the redone call at that position
// is staged again; a drawn one is replaced by the first redone call (the draw among the later
// calls goes on from there), so the checked call is always one of the kept samples.
void DeviceRunner::rewound(std::size_t index) {
  if (!order_ || !staged_done_) return;
  if (order_->warmup.size() + static_cast<std::size_t>(staged_position_) < index) return;
  staged_done_ = false;
  restage_ = check_position_ < 0;
}

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA

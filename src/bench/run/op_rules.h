// What the run loop knows about particular op types: the roofline a passed evaluation is held
// against, and the sampling op type's distribution check (many draws on one input set).
#pragma once

#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/workload.h"
#ifdef FIB_HAVE_CUDA
#include "fib/cuda/roofline.h"
#endif

namespace fib::bench::detail {

#ifdef FIB_HAVE_CUDA
// What a call must at least do, where the definition says it: the bytes of its inputs (read from
// DRAM: the L2 is flushed before each timed call) for op types that read every input whole, and
// the FLOPs of a GEMM. Other op types read only part of their inputs (paged caches, routed
// experts) and declare nothing.
cuda::RooflineInput roofline_input(const Definition& def, const Workload& w, double median_ms);
#endif

// Whether a solution's outputs are also checked as a distribution: the worker draws many
// samples on one input set, judged against the reference's exact distribution.
bool checks_sampling_distribution(const Definition& def);
// How many draws that check takes (the resolved evaluation settings' extras).
int sampling_draws(const Json& eval_extra);

}  // namespace fib::bench::detail

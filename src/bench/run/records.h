// The dataset records a run cannot use: names on the command line that match nothing, and
// records that failed to load (an unknown language, a bad dtype, broken JSON). A run never
// drops them silently: a named one stops the run before anything runs (unless --keep-going),
// and the others are reported, skipped and counted, so the run exits 1 at its end.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"

namespace fib::bench::detail {

// Checks the allow-lists of `o` against `set`. Throws fib::Error listing every named record
// that is missing or failed to load (with its file, JSON path and the loader's message, or a
// did-you-mean), unless o.keep_going, where each becomes a warning through `message`. Records
// that failed to load and fall in the run's selection are reported through `message`; returns
// how many there are.
std::size_t check_records(const TraceSet& set, const RunOptions& o,
                          const std::function<void(const std::string&)>& message);

}  // namespace fib::bench::detail

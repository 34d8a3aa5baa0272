// Shared by the worker's request handlers (bench/worker/worker_common.h).
#include "worker_common.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "fib/base/diagnostics.h"
#include "fib/bench/eval/compare.h"
#include "fib/bench/eval/op_family.h"
#include "fib/tensor/safetensors.h"

namespace fib::bench::detail {

InputSets load_sets(WorkerState& st, const std::string& path) {
  if (path != st.sets_path || !st.sets) {
    st.sets.reset();
    auto sets = std::make_shared<const std::vector<InputSet>>(read_input_sets(path));
    if (sets->empty()) throw Error(path, "no input sets");
    st.sets = std::move(sets);
    st.sets_path = path;
  }
  return st.sets;
}

bool checked_call_kept(int check_position, std::size_t i) {
  if (check_position >= 0) return static_cast<std::size_t>(check_position) == i;
  std::uint64_t r = 0;
  auto* p = reinterpret_cast<unsigned char*>(&r);
  std::size_t got = 0;
  while (got < sizeof r) {
    const ssize_t n = ::getrandom(p + got, sizeof r - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (errno != EINTR) {
      throw Error("worker", fmt::format("getrandom failed: {}", std::strerror(errno)));
    }
  }
  return r % (i + 1) == 0;
}

void write_checked_outputs(const std::string& path,
                           const std::vector<std::pair<std::string, Tensor>>& outputs) {
  SafetensorsWriteOptions scratch;
  scratch.durable = false;
  write_safetensors(path, outputs, {}, scratch);
}

void append_set_reference_extras(const Definition& def, const InputSet& in, const Json& eval_extra,
                                 std::vector<std::pair<std::string, Tensor>>* outputs) {
  if (op_family(def).reference_extras == nullptr) return;
  reference::Arguments args;
  args.tensors = in.tensors;
  args.scalars = in.scalars;
  append_reference_extras(def, args, eval_extra, outputs);
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

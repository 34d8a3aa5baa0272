// The workload check: every workload fits its definition (axes, inputs, constraints), its
// blobs hold the tensors it names, and known pitfalls of an op family are pointed out.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <regex>
#include <set>

#include "fib/dataset/blob.h"
#include "fib/tensor/safetensors_header.h"
#include "validate/checks.h"

namespace fib::validate::detail {

namespace {

// A safetensors blob opened for element reads (constraints such as kv_indptr[-1]).
struct OpenBlob {
  SafetensorsHeader header;
  int fd = -1;
  OpenBlob() = default;
  OpenBlob(const OpenBlob&) = delete;  // owns a file descriptor that must be closed once
  OpenBlob& operator=(const OpenBlob&) = delete;
  ~OpenBlob() {
    if (fd >= 0) ::close(fd);
  }

  std::optional<Scalar> element(const SafetensorsEntry& e, std::int64_t flat) const {
    if (!e.dtype) return std::nullopt;
    const int bits = dtype_bits(*e.dtype);
    if (bits < 8) return std::nullopt;
    const auto size = static_cast<std::uint64_t>(bits / 8);
    const std::uint64_t off =
        header.data_offset() + e.begin + static_cast<std::uint64_t>(flat) * size;
    unsigned char buf[8] = {};
    if (::pread(fd, buf, size, static_cast<off_t>(off)) != static_cast<ssize_t>(size))
      return std::nullopt;
    auto load = [&](auto v) {
      std::memcpy(&v, buf, sizeof v);
      return v;
    };
    switch (*e.dtype) {
      case DType::kInt64:
        return Scalar{load(std::int64_t{})};
      case DType::kInt32:
        return Scalar{std::int64_t{load(std::int32_t{})}};
      case DType::kInt16:
        return Scalar{std::int64_t{load(std::int16_t{})}};
      case DType::kInt8:
        return Scalar{std::int64_t{load(std::int8_t{})}};
      case DType::kUInt8:
        return Scalar{std::int64_t{load(std::uint8_t{})}};
      case DType::kBool:
        return Scalar{buf[0] != 0};
      case DType::kFloat32:
        return Scalar{double{load(float{})}};
      default:
        return std::nullopt;
    }
  }
};

class BlobCache {
 public:
  explicit BlobCache(const std::filesystem::path& root) : root_(root) {}
  // The opened blob, or null with the reason in *why. *corrupt is set when the file exists
  // but is not a valid safetensors file (missing files are the layout check's).
  const OpenBlob* open(const std::string& relative, std::string* why, bool* corrupt) {
    auto it = cache_.find(relative);
    if (it != cache_.end()) {
      if (!it->second.blob) *why = it->second.why;
      *corrupt = it->second.corrupt;
      return it->second.blob.get();
    }
    Entry e;
    const BlobLocation loc = locate_blob(root_, relative);
    if (loc.state != BlobState::kOk) {
      e.why = loc.message;
    } else {
      Diagnostics d;
      auto h = read_safetensors_header(loc.path.string(), d);
      if (!h) {
        e.corrupt = true;
        e.why = fmt::format("{} is not a valid safetensors file: {}", relative,
                            d.empty() ? "unreadable" : d.items().front().message);
      } else {
        e.blob = std::make_unique<OpenBlob>();
        e.blob->header = std::move(*h);
        e.blob->fd = ::open(loc.path.c_str(), O_RDONLY | O_CLOEXEC);
      }
    }
    *why = e.why;
    *corrupt = e.corrupt;
    return cache_.emplace(relative, std::move(e)).first->second.blob.get();
  }

 private:
  struct Entry {
    std::unique_ptr<OpenBlob> blob;
    std::string why;
    bool corrupt = false;
  };
  std::filesystem::path root_;
  std::map<std::string, Entry> cache_;
};

// Causal prefill with one sequence: its queries that precede every key see nothing. The
// vectorized references then give NaN and the loop ones 0, so the verdict depends on which
// reference is used.
struct MaskedRows {
  std::int64_t q_len = 0;
  std::int64_t kv_max = 0;
};
std::optional<MaskedRows> fully_masked_rows(const Definition& d, const AxisValues& bound) {
  if (d.name.find("causal") == std::string::npos) return std::nullopt;
  const auto total_q = axis_value(bound, "total_q");
  const auto len_indptr = axis_value(bound, "len_indptr");
  if (!total_q || !len_indptr || *len_indptr != 2)
    return std::nullopt;  // several sequences: needs data
  std::optional<std::int64_t> kv_max;
  if (auto total_kv = axis_value(bound, "total_kv")) {
    kv_max = *total_kv;
  } else if (auto n = axis_value(bound, "num_kv_indices")) {
    kv_max = *n * axis_value(bound, "page_size").value_or(1);
  }
  if (!kv_max || *kv_max >= *total_q) return std::nullopt;
  return MaskedRows{*total_q, *kv_max};
}

}  // namespace

void check_workloads(Context& ctx) {
  const TraceSet& set = ctx.set;
  BlobCache blobs(set.root());
  std::map<std::string, std::string> first_seen;  // uuid -> where
  for (const auto& dr : set.definitions()) {
    const Definition& d = dr.value;
    const auto& records = set.workloads(d.name);
    if (records.empty()) continue;
    CheckResult& out = ctx.result(d.name, Check::kWorkload);
    std::size_t valid = 0, masked = 0;
    std::string masked_example;
    std::map<std::string, std::pair<std::size_t, double>>
        scale_mismatch;  // input -> (count, example)
    for (const auto& r : records) {
      const Workload& w = r.value.workload;
      const std::string where = set.where(r.source);
      Diagnostics diag;
      ReadContext rc{where, &diag};
      bool ok = true;
      if (r.value.definition != d.name) continue;  // indexed by its own name; cannot differ
      if (auto [it, fresh] = first_seen.emplace(w.uuid, where); !fresh) {
        rc.error(JsonPath().key("workload").key("uuid"),
                 fmt::format("duplicate workload uuid {} (first at {})", w.uuid, it->second),
                 "give every workload its own uuid");
        ok = false;
      }
      ok = check_workload(d, w, JsonPath().key("workload"), rc) && ok;
      auto bound = d.bind_axes(w.axes);
      // Blob contents: the tensor exists with the definition's dtype and shape.
      std::map<std::string, std::pair<const OpenBlob*, const SafetensorsEntry*>> data;
      if (ok && bound && ctx.options.read_blobs && ctx.has_blob_folder) {
        for (const auto& in : w.inputs) {
          if (in.kind != InputKind::kSafetensors) continue;
          const TensorSpec* spec = d.input(in.name);
          std::string why;
          bool corrupt = false;
          const OpenBlob* blob = blobs.open(in.path, &why, &corrupt);
          const JsonPath root, workload = root.key("workload"), inputs = workload.key("inputs");
          const JsonPath ip = inputs.key(in.name);
          if (corrupt) {
            rc.error(ip.key("path"), why);
            ok = false;
          }
          if (blob == nullptr || spec == nullptr) continue;  // missing blobs: the layout check
          const SafetensorsEntry* e = blob->header.find(in.tensor_key);
          if (e == nullptr) {
            std::vector<std::string> keys;
            for (const auto& t : blob->header.tensors) keys.push_back(t.name);
            rc.error(
                ip.key("tensor_key"), fmt::format("{} has no tensor '{}'", in.path, in.tensor_key),
                keys.empty() ? std::string() : fmt::format("it holds: {}", fmt::join(keys, ", ")));
            ok = false;
            continue;
          }
          if (e->dtype != spec->dtype) {
            rc.error(ip,
                     fmt::format("tensor '{}' in {} is {} but the definition wants {}",
                                 in.tensor_key, in.path, e->dtype_code, dtype_name(spec->dtype)));
            ok = false;
          }
          const auto want = d.concrete_shape(*spec, *bound);
          if (want && *want != e->shape) {
            rc.error(
                ip, fmt::format(
                        "tensor '{}' in {} has shape [{}] but the workload's axes give [{}]",
                        in.tensor_key, in.path, fmt::join(e->shape, ", "), fmt::join(*want, ", ")));
            ok = false;
          }
          if (ok) data[in.name] = {blob, e};
        }
        // Constraints on tensor contents, now that the data is at hand.
        if (ok && !data.empty()) {
          auto element = [&](std::string_view name,
                             std::span<const std::int64_t> index) -> std::optional<Scalar> {
            auto it = data.find(std::string(name));
            if (it == data.end()) return std::nullopt;
            std::int64_t flat = 0;
            const auto& shape = it->second.second->shape;
            for (std::size_t k = 0; k < index.size() && k < shape.size(); ++k)
              flat = flat * shape[k] + index[k];
            return it->second.first->element(*it->second.second, flat);
          };
          WorkloadConstraintEnv env(d, *bound, element);
          env.set_scalars(w);
          for (const auto& c : d.parsed_constraints) {
            const auto res = c.evaluate(env);
            if (res.verdict == Verdict::kViolated) {
              rc.error(JsonPath().key("workload"),
                       fmt::format("blob data violates constraint '{}': {}", c.text(), res.detail));
              ok = false;
            }
          }
        }
      }
      for (const auto& x : diag) out.add(from_diagnostic(x));
      if (!ok) continue;
      ++valid;
      if (bound) {
        if (auto m = fully_masked_rows(d, *bound)) {
          if (masked++ == 0) {
            masked_example = fmt::format("{} at {}: {} queries, at most {} keys", w.uuid, where,
                                         m->q_len, m->kv_max);
          }
        }
      }
      for (const auto& spec : d.inputs) {
        if (!spec.is_scalar()) continue;
        const auto described = described_inverse_sqrt(spec);
        const WorkloadInput* in = w.input(spec.name);
        if (!described || in == nullptr || in->kind != InputKind::kScalar) continue;
        const double v = std::visit([](auto x) { return static_cast<double>(x); }, in->value);
        if (std::fabs(v - described->value) > 1e-3 * described->value) {
          auto& [count, example] = scale_mismatch[spec.name];
          if (count++ == 0) example = v;
        }
      }
    }
    if (masked > 0) {
      out.add(message(
          Severity::kWarning,
          fmt::format("{} of {} workloads have a causal sequence with fewer keys than queries "
                      "(e.g. {}): its first query rows see no key; vectorized references give "
                      "NaN there and loop references 0",
                      masked, records.size(), masked_example),
          set.where(records.front().source), {},
          "define the output of fully masked rows (0, lse -inf) and compare with that"));
    }
    for (const auto& [name, info] : scale_mismatch) {
      const auto described = described_inverse_sqrt(*d.input(name));
      out.add(message(
          Severity::kWarning,
          fmt::format("{} of {} workloads pass {} = {:.6g}, but the input's description gives {} = "
                      "{:.6g}",
                      info.first, records.size(), name, info.second, described->text,
                      described->value),
          set.where(records.front().source),
          JsonPath().key("inputs").key(name).key("description").str(),
          "update the description to the scale the model really uses"));
    }
    out.add(
        message(Severity::kInfo, fmt::format("{} of {} workloads valid", valid, records.size())));
  }
}

}  // namespace fib::validate::detail

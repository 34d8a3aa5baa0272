// page_append: each appended token's rows written into its slot of the paged caches, the rest
// of each cache copied as it is. Token i of sequence b = batch_indices[i] at position p goes to
// page kv_indices[kv_indptr[b] + p / page_size], slot p % page_size. GQA appends append_key and
// append_value into k_cache and v_cache; MLA appends append_ckv and append_kpe into ckv_cache
// and kpe_cache (told apart by the definition's inputs). A token whose sequence or position
// lies outside the page table is an error naming it.
#include <fmt/format.h>

#include <array>
#include <cstring>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

struct Stream {
  const char* rows;   // the appended rows [nnz_kv, ...]
  const char* cache;  // the cache before the append [num_pages, page_size, ...]
};

constexpr std::array<Stream, 2> kGqa = {{{"append_key", "k_cache"}, {"append_value", "v_cache"}}};
constexpr std::array<Stream, 2> kMla = {{{"append_ckv", "ckv_cache"}, {"append_kpe", "kpe_cache"}}};

// The flat slot (page * page_size + offset) of each appended token.
std::vector<std::int64_t> slots(const CallContext& ctx, const Arguments& args) {
  const std::int64_t nnz = axis(ctx, "nnz_kv"), batch = axis(ctx, "batch_size"),
                     page_size = axis(ctx, "page_size"), pool = axis(ctx, "num_pages");
  const Tensor& seq = args.tensor("batch_indices");
  const Tensor& pos = args.tensor("positions");
  const Tensor& indices = args.tensor("kv_indices");
  const Tensor& indptr = args.tensor("kv_indptr");
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < nnz; ++i) {
    const auto b = static_cast<std::int64_t>(seq.get(i));
    const auto p = static_cast<std::int64_t>(pos.get(i));
    if (b < 0 || b >= batch) {
      throw Error(ctx.definition.name,
                  fmt::format("batch_indices[{}] = {} is outside [0, {})", i, b, batch),
                  "every appended token must belong to a sequence of the batch");
    }
    const auto first = static_cast<std::int64_t>(indptr.get(b));
    const auto count = static_cast<std::int64_t>(indptr.get(b + 1)) - first;
    if (p < 0 || p / page_size >= count) {
      throw Error(ctx.definition.name,
                  fmt::format("positions[{}] = {} lies past sequence {}'s {} pages of {}", i, p, b,
                              count, page_size),
                  "each position must fall inside its sequence's pages");
    }
    const auto page = static_cast<std::int64_t>(indices.get(first + p / page_size));
    if (page < 0 || page >= pool) {
      throw Error(
          ctx.definition.name,
          fmt::format("kv_indices[{}] = {} is outside [0, {})", first + p / page_size, page, pool),
          "page ids must name pages of the cache");
    }
    out.push_back(page * page_size + p % page_size);
  }
  return out;
}

class PageAppend final : public Kernel {
 public:
  std::string_view id() const override { return "page_append"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "page_append") return false;
    for (const char* n : {"batch_indices", "positions", "kv_indices", "kv_indptr"}) {
      if (!def.input(n)) {
        *why = fmt::format("expects input {} (FlashInfer's append_paged_kv_cache interface)", n);
        return false;
      }
    }
    for (const Stream& s : streams(def)) {
      const TensorSpec* in = def.input(s.cache);
      const TensorSpec* out = def.output(std::string("new_") + s.cache);
      if (!def.input(s.rows) || !in || !out || in->dtype != out->dtype) {
        *why = fmt::format("expects inputs {} and {} and output new_{} of {}'s dtype", s.rows,
                           s.cache, s.cache, s.cache);
        return false;
      }
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const auto where = slots(ctx, args);
    Outputs o;
    for (const Stream& s : streams(ctx.definition)) {
      const std::string name = std::string("new_") + s.cache;
      Tensor out = make_output(ctx, name);
      const Tensor& cache = args.tensor(s.cache);
      std::memcpy(out.bytes().data(), cache.bytes().data(), out.nbytes());
      write_rows(args.tensor(s.rows), where, out);
      o.emplace(name, std::move(out));
    }
    return o;
  }

 private:
  static const std::array<Stream, 2>& streams(const Definition& def) {
    return def.input("append_ckv") ? kMla : kGqa;
  }

  static void write_rows(const Tensor& rows, const std::vector<std::int64_t>& where, Tensor& out) {
    const auto tokens = static_cast<std::int64_t>(where.size());
    if (tokens == 0) return;
    const std::int64_t width = rows.numel() / tokens;
    std::vector<float> x(static_cast<std::size_t>(width));
    for (std::int64_t i = 0; i < tokens; ++i) {
      load_floats(rows, i * width, width, x.data());
      store_floats(x.data(), width, out, where[static_cast<std::size_t>(i)] * width);
    }
  }
};

}  // namespace

void add_page_append(KernelList& list) { list.push_back(std::make_unique<PageAppend>()); }

}  // namespace fib::reference::detail

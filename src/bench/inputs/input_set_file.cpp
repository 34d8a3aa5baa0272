#include "fib/bench/inputs/input_set_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string_view>

#include "fib/tensor/safetensors.h"

namespace fib::bench::detail {

namespace {
Scalar scalar_from_json(const std::string& text) {
  const Json j = Json::parse(text);
  if (j.is_boolean()) return Scalar{j.get<bool>()};
  if (j.is_number_integer()) return Scalar{j.get<std::int64_t>()};
  return Scalar{j.get<double>()};
}

// Splits "<k>/<name>" into k and name; false for keys of another shape.
bool split_key(const std::string& key, int* k, std::string* name) {
  const auto slash = key.find('/');
  if (slash == std::string::npos || slash == 0) return false;
  try {
    *k = std::stoi(key.substr(0, slash));
  } catch (const std::exception&) {
    return false;
  }
  *name = key.substr(slash + 1);
  return true;
}

std::string sum_text(const InputSum& s) { return fmt::format("{:016x}{:016x}", s.high, s.low); }

std::optional<InputSum> sum_from_text(const std::string& text) {
  if (text.size() != 32) return std::nullopt;
  try {
    return InputSum{std::stoull(text.substr(0, 16), nullptr, 16),
                    std::stoull(text.substr(16), nullptr, 16)};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

constexpr std::string_view kSumPrefix = "fib.xxh3.";
constexpr std::string_view kFillPrefix = "fib.fill.";

std::uint32_t float_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

float bits_float(const Json& j, const char* key) {
  return std::bit_cast<float>(j.at(key).get<std::uint32_t>());
}

// What determines a deferred fill's bytes, for the set's digest.
BulkFill fill_from_metadata(const std::filesystem::path& path, const std::string& key,
                            const std::string& text) {
  try {
    return bulk_fill_from_json(Json::parse(text));
  } catch (const Json::exception& e) {
    throw Error(path.string(), fmt::format("{}: {}", key, e.what()));
  } catch (const Error& e) {
    throw Error(path.string(), fmt::format("{}: {}", key, e.what()));
  }
}

std::string fill_text(const BulkFill& fill) {
  return fmt::format("fill/v{}:{}", kInputSynthesisVersion, bulk_fill_json(fill).dump());
}
}  // namespace

Json bulk_fill_json(const BulkFill& fill) {
  const counter_random::FillSpec& s = fill.spec;
  return Json{{"dist", static_cast<int>(s.dist)},
              {"a", float_bits(s.a)},
              {"b", float_bits(s.b)},
              {"lo", float_bits(s.lo)},
              {"hi", float_bits(s.hi)},
              {"first", s.first},
              {"span", s.span},
              {"key", fill.key},
              {"dtype", std::string(dtype_name(fill.dtype))},
              {"shape", fill.shape}};
}

BulkFill bulk_fill_from_json(const Json& j) {
  BulkFill fill;
  try {
    const int dist = j.at("dist").get<int>();
    if (dist < 0 || dist > static_cast<int>(counter_random::Dist::kInteger)) {
      throw Error("fill.dist", fmt::format("{} is no distribution", dist));
    }
    fill.spec.dist = static_cast<counter_random::Dist>(dist);
    fill.spec.a = bits_float(j, "a");
    fill.spec.b = bits_float(j, "b");
    fill.spec.lo = bits_float(j, "lo");
    fill.spec.hi = bits_float(j, "hi");
    fill.spec.first = j.at("first").get<std::int64_t>();
    fill.spec.span = j.at("span").get<std::uint64_t>();
    fill.key = j.at("key").get<std::uint64_t>();
    const std::optional<DType> dtype = parse_dtype(j.at("dtype").get<std::string>());
    if (!dtype) throw Error("fill.dtype", j.at("dtype").dump());
    fill.dtype = *dtype;
    fill.shape = j.at("shape").get<Shape>();
  } catch (const Json::exception& e) {
    throw Error("fill", e.what());
  }
  check_bulk_fill(fill);
  for (const std::int64_t d : fill.shape) {
    if (d < 0) throw Error("fill.shape", "a negative extent");
  }
  return fill;
}

void make_fills_on_host(InputSet& set) {
  for (const auto& [name, fill] : set.fills)
    set.tensors.insert_or_assign(name, make_bulk_fill(fill));
  set.fills.clear();
}

namespace {

// The names of `fills` ((name, the fill's JSON) per set and input) that occur with one fill twice
// or more.
std::set<std::string, std::less<>> names_filled_alike(
    const std::vector<std::pair<std::string, std::string>>& fills) {
  std::map<std::pair<std::string, std::string>, int> count;
  std::set<std::string, std::less<>> shared;
  for (const auto& f : fills) {
    if (++count[f] == 2) shared.insert(f.first);
  }
  return shared;
}

}  // namespace

std::set<std::string, std::less<>> shared_fills(const std::vector<InputSet>& sets) {
  std::vector<std::pair<std::string, std::string>> fills;
  for (const InputSet& set : sets) {
    for (const auto& [name, fill] : set.fills)
      fills.emplace_back(name, bulk_fill_json(fill).dump());
  }
  return names_filled_alike(fills);
}

std::set<std::string, std::less<>> shared_fills(const std::filesystem::path& path) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  std::vector<std::pair<std::string, std::string>> fills;
  int k = 0;
  std::string name;
  for (const auto& [key, v] : f.header().metadata) {
    if (key.rfind(kFillPrefix, 0) != 0 || !split_key(key.substr(kFillPrefix.size()), &k, &name))
      continue;
    fills.emplace_back(name, bulk_fill_json(fill_from_metadata(path, key, v)).dump());
  }
  return names_filled_alike(fills);
}

InputSum chunk_sum(const void* data, std::size_t bytes) {
  const XXH128_hash_t h = XXH3_128bits(data, bytes);
  return InputSum{h.high64, h.low64};
}

InputSum combine_chunk_sums(const InputSum* chunks, std::size_t count) {
  return chunk_sum(chunks, count * sizeof(InputSum));
}

InputSum input_sum(const void* data, std::size_t bytes) {
  if (bytes <= kInputSumChunk) return chunk_sum(data, bytes);
  std::vector<InputSum> chunks;
  const auto* p = static_cast<const std::byte*>(data);
  for (std::size_t at = 0; at < bytes; at += kInputSumChunk) {
    chunks.push_back(chunk_sum(p + at, std::min(kInputSumChunk, bytes - at)));
  }
  return combine_chunk_sums(chunks.data(), chunks.size());
}

InputSetDigest digest_input_set(const MaterializedInputs& set) {
  InputSetDigest d;
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  const auto add = [state](const std::string& text) {
    const std::uint64_t n = text.size();
    XXH3_128bits_update(state, &n, sizeof n);
    XXH3_128bits_update(state, text.data(), text.size());
  };
  for (const auto& [name, t] : set.tensors) {
    const InputSum s = input_sum(t.raw(), t.nbytes());
    d.sums.emplace(name, s);
    add(fmt::format("{}:{}:{}:{}", name, dtype_name(t.dtype()), fmt::join(t.shape(), "x"),
                    sum_text(s)));
  }
  for (const auto& [name, fill] : set.deferred) add(name + ":" + fill_text(fill));
  for (const auto& [name, v] : set.scalars) {
    add(name + "=" + std::visit([](auto x) { return Json(x); }, v).dump());
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  d.digest = sum_text(InputSum{h.high64, h.low64});
  return d;
}

void make_deferred_on_host(MaterializedInputs& set, InputSetDigest& digest) {
  for (const auto& [name, fill] : set.deferred) {
    Tensor t = make_bulk_fill(fill);
    digest.sums.insert_or_assign(name, input_sum(t.raw(), t.nbytes()));
    set.tensors.insert_or_assign(name, std::move(t));
  }
  set.deferred.clear();
}

void write_input_sets(const std::filesystem::path& path, const Definition& def,
                      const std::vector<MaterializedInputs>& sets, std::uint64_t layout_seed,
                      const std::vector<InputSetDigest>& digests) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> meta;
  meta["fib.sets"] = std::to_string(sets.size());
  std::vector<std::size_t> order(sets.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(layout_seed));
  for (const std::size_t k : order) {
    for (const auto& spec : def.inputs) {
      if (auto it = sets[k].tensors.find(spec.name); it != sets[k].tensors.end()) {
        tensors.emplace_back(fmt::format("{}/{}", k, spec.name), it->second);
        if (k < digests.size()) {
          meta.emplace(fmt::format("{}{}/{}", kSumPrefix, k, spec.name),
                       sum_text(digests[k].sums.at(spec.name)));
        }
      }
      if (auto it = sets[k].deferred.find(spec.name); it != sets[k].deferred.end()) {
        meta.emplace(fmt::format("{}{}/{}", kFillPrefix, k, spec.name),
                     bulk_fill_json(it->second).dump());
      }
      if (auto it = sets[k].scalars.find(spec.name); it != sets[k].scalars.end()) {
        const Json v = std::visit([](auto x) { return Json(x); }, it->second);
        meta.emplace(fmt::format("fib.scalar.{}/{}", k, spec.name), v.dump());
      }
    }
  }
  SafetensorsWriteOptions options;
  options.alignment = 64;
  options.durable = false;  // remade by any rerun; the atomic rename is what readers need
  write_safetensors(path, tensors, meta, options);
}

std::vector<InputSet> read_input_sets(const std::filesystem::path& path) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  const auto& meta = f.header().metadata;
  std::size_t count = 0;
  bool found = false;
  for (const auto& [k, v] : meta) {
    if (k == "fib.sets") {
      count = std::stoul(v);
      found = true;
    }
  }
  if (!found) throw Error(path.string(), "not an input-set file (no fib.sets)");
  std::vector<InputSet> sets(count);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path.string(), fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error(path.string(), fmt::format("cannot stat: {}", std::strerror(errno)));
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* m =
      size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (m == MAP_FAILED)
    throw Error(path.string(), fmt::format("cannot map: {}", std::strerror(errno)));
  const std::shared_ptr<std::byte[]> mapping(static_cast<std::byte*>(m),
                                             [size](std::byte* p) { ::munmap(p, size); });
  const std::uint64_t data = f.header().data_offset();
  int k = 0;
  std::string name;
  for (const auto& e : f.header().tensors) {
    if (!split_key(e.name, &k, &name) || k < 0 || static_cast<std::size_t>(k) >= sets.size())
      continue;
    if (!e.dtype)
      throw Error(path.string(), fmt::format("tensor '{}' has dtype {}", e.name, e.dtype_code));
    sets[static_cast<std::size_t>(k)].tensors.emplace(
        name, Tensor::view(*e.dtype, e.shape,
                           std::shared_ptr<std::byte[]>(mapping, mapping.get() + data + e.begin)));
  }
  for (const auto& [key, v] : meta) {
    const bool scalar = key.rfind("fib.scalar.", 0) == 0;
    const bool sum = key.rfind(kSumPrefix, 0) == 0;
    const bool fill = key.rfind(kFillPrefix, 0) == 0;
    if (!scalar && !sum && !fill) continue;
    const std::size_t prefix = scalar ? 11 : sum ? kSumPrefix.size() : kFillPrefix.size();
    if (!split_key(key.substr(prefix), &k, &name) || k < 0 ||
        static_cast<std::size_t>(k) >= sets.size())
      continue;
    InputSet& set = sets[static_cast<std::size_t>(k)];
    if (scalar) {
      set.scalars.emplace(name, scalar_from_json(v));
    } else if (fill) {
      set.fills.emplace(name, fill_from_metadata(path, key, v));
    } else if (const std::optional<InputSum> s = sum_from_text(v)) {
      set.sums.emplace(name, *s);
    }
  }
  return sets;
}

reference::Arguments read_input_set(const std::filesystem::path& path, int k) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  reference::Arguments a;
  const std::string prefix = fmt::format("{}/", k);
  for (const auto& key : f.keys()) {
    if (key.rfind(prefix, 0) == 0) a.tensors.emplace(key.substr(prefix.size()), f.read(key));
  }
  for (const auto& [key, v] : f.header().metadata) {
    if (key.rfind("fib.scalar." + prefix, 0) == 0) {
      a.scalars.emplace(key.substr(11 + prefix.size()), scalar_from_json(v));
    }
    if (key.rfind(std::string(kFillPrefix) + prefix, 0) == 0) {
      a.tensors.emplace(key.substr(kFillPrefix.size() + prefix.size()),
                        make_bulk_fill(fill_from_metadata(path, key, v)));
    }
  }
  return a;
}

}  // namespace fib::bench::detail

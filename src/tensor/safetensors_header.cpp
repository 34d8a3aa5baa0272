#include "fib/tensor/safetensors_header.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fib/base/json.h"
#include "fib/trace/json_reader.h"

namespace fib {

namespace {

struct CodeInfo {
  std::string_view code;
  int bits;
  std::optional<DType> dtype;
};

constexpr CodeInfo kCodes[] = {
    {"F64", 64, std::nullopt},
    {"F32", 32, DType::kFloat32},
    {"F16", 16, DType::kFloat16},
    {"BF16", 16, DType::kBFloat16},
    {"I64", 64, DType::kInt64},
    {"I32", 32, DType::kInt32},
    {"I16", 16, DType::kInt16},
    {"I8", 8, DType::kInt8},
    {"U8", 8, DType::kUInt8},
    {"BOOL", 8, DType::kBool},
    {"F8_E4M3", 8, DType::kFloat8E4M3FN},
    {"F8_E5M2", 8, DType::kFloat8E5M2},
    {"F8_E8M0", 8, std::nullopt},
    {"F4", 4, DType::kFloat4E2M1},
    {"U16", 16, std::nullopt},
    {"U32", 32, std::nullopt},
    {"U64", 64, std::nullopt},
    // The rest of the format's dtype table (safetensors 0.8), none a FlashInfer-Trace dtype.
    {"F8_E4M3FNUZ", 8, std::nullopt},
    {"F8_E5M2FNUZ", 8, std::nullopt},
    {"F6_E2M3", 6, std::nullopt},
    {"F6_E3M2", 6, std::nullopt},
    {"C64", 64, std::nullopt},
};

const CodeInfo* code_info(std::string_view code) {
  for (const auto& c : kCodes) {
    if (c.code == code) return &c;
  }
  return nullptr;
}

bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return !__builtin_mul_overflow(a, b, &out);
}

}  // namespace

const SafetensorsEntry* SafetensorsHeader::find(std::string_view name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::optional<DType> dtype_from_safetensors(std::string_view code) {
  const CodeInfo* c = code_info(code);
  return c ? c->dtype : std::nullopt;
}

std::string_view safetensors_code(DType t) {
  for (const auto& c : kCodes) {
    if (c.dtype == t) return c.code;
  }
  return "?";
}

namespace {

// Reports one problem with the header of `file`.
struct Reporter {
  const std::string& file;
  Diagnostics& diag;
  void operator()(std::string path, std::string msg) const {
    diag.error(file, std::move(path), std::move(msg));
  }
};

// The header's JSON text (trailing padding spaces removed), after checking its 8-byte length
// against the file and the limit; sets h's header and data sizes.
std::optional<std::string_view> header_text(std::string_view prefix, std::uint64_t file_size,
                                            const Reporter& fail, SafetensorsHeader& h) {
  if (file_size < 8 || prefix.size() < 8) {
    fail({}, fmt::format("not a safetensors file: {} bytes, shorter than the 8-byte header "
                         "length",
                         file_size));
    return std::nullopt;
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(prefix[static_cast<std::size_t>(i)]);
  if (n > kMaxSafetensorsHeaderBytes) {
    fail({}, fmt::format("header length {} exceeds the {} byte limit (corrupt or not a "
                         "safetensors file)",
                         n, kMaxSafetensorsHeaderBytes));
    return std::nullopt;
  }
  if (n > file_size - 8) {
    fail({}, fmt::format("header length {} runs past the end of the {}-byte file", n, file_size));
    return std::nullopt;
  }
  if (prefix.size() < 8 + n) {
    fail({}, "header is truncated");
    return std::nullopt;
  }
  h.header_bytes = n;
  h.data_bytes = file_size - 8 - n;
  std::string_view text = prefix.substr(8, static_cast<std::size_t>(n));
  // The format allows trailing spaces as padding.
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty() || text.front() != '{') {
    fail({}, "header does not start with '{'");
    return std::nullopt;
  }
  return text;
}

// The __metadata__ entry: an object of string -> string, into h.metadata.
bool read_metadata(const std::string& name, const Json& v, const Reporter& fail,
                   SafetensorsHeader& h) {
  if (!v.is_object()) {
    fail(JsonPath().key(name).str(), "__metadata__ must be an object of string -> string");
    return false;
  }
  bool ok = true;
  for (auto m = v.begin(); m != v.end(); ++m) {
    if (!m.value().is_string()) {
      fail(JsonPath().key(name).key(m.key()).str(), "metadata values must be strings");
      ok = false;
    } else {
      h.metadata.emplace_back(m.key(), m.value().get<std::string>());
    }
  }
  return ok;
}

// Whether a tensor entry holds only dtype, shape and data_offsets (each other field reported).
bool known_fields_only(const Json& v, const std::string& where, const Reporter& fail) {
  bool ok = true;
  for (auto k = v.begin(); k != v.end(); ++k) {
    if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets") {
      fail(where, fmt::format("unknown field '{}' in tensor entry", k.key()));
      ok = false;
    }
  }
  return ok;
}

// The entry's dtype code into e; null (reported) when missing or unknown.
const CodeInfo* read_dtype(const Json& v, const std::string& where, const Reporter& fail,
                           SafetensorsEntry& e) {
  const auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) {
    fail(where, "missing or non-string 'dtype'");
    return nullptr;
  }
  e.dtype_code = dt->get<std::string>();
  const CodeInfo* info = code_info(e.dtype_code);
  if (info == nullptr) {
    fail(where + ".dtype", fmt::format("unknown safetensors dtype '{}'", e.dtype_code));
    return nullptr;
  }
  e.dtype = info->dtype;
  return info;
}

// The entry's shape into e, and its element count; nullopt (reported) when a dimension is not
// a non-negative integer or the count overflows.
std::optional<std::uint64_t> read_shape(const Json& shape, const std::string& where,
                                        const Reporter& fail, SafetensorsEntry& e) {
  std::uint64_t numel = 1;
  for (const auto& d : shape) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0)) {
      fail(where + ".shape", fmt::format("dimension {} is not a non-negative integer", d.dump()));
      return std::nullopt;
    }
    const std::uint64_t dim = d.get<std::uint64_t>();
    if (dim > static_cast<std::uint64_t>(INT64_MAX) || !checked_mul(numel, dim, numel)) {
      fail(where + ".shape", "the element count overflows 64 bits");
      return std::nullopt;
    }
    e.shape.push_back(static_cast<std::int64_t>(dim));
  }
  return numel;
}

// The entry's data_offsets into e, checked to lie inside the data section of `data_bytes`.
bool read_offsets(const Json& v, const std::string& where, std::uint64_t data_bytes,
                  const Reporter& fail, SafetensorsEntry& e) {
  const auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned()) {
    fail(where, "'data_offsets' must be [begin, end] with non-negative integers");
    return false;
  }
  e.begin = (*off)[0].get<std::uint64_t>();
  e.end = (*off)[1].get<std::uint64_t>();
  if (e.begin > e.end) {
    fail(where + ".data_offsets", fmt::format("begin {} is after end {}", e.begin, e.end));
    return false;
  }
  if (e.end > data_bytes) {
    fail(where + ".data_offsets",
         fmt::format("end {} lies past the data section ({} bytes)", e.end, data_bytes));
    return false;
  }
  return true;
}

// Whether the entry's data holds exactly its shape's elements of its dtype.
bool size_matches(const SafetensorsEntry& e, const CodeInfo& info, std::uint64_t numel,
                  const Json& shape, const std::string& where, const Reporter& fail) {
  std::uint64_t bits = 0;
  if (!checked_mul(numel, static_cast<std::uint64_t>(info.bits), bits)) {
    fail(where, "the byte size overflows 64 bits");
    return false;
  }
  const std::uint64_t bytes = bits / 8 + (bits % 8 ? 1 : 0);
  if (e.end - e.begin != bytes) {
    fail(where + ".data_offsets", fmt::format("holds {} bytes but shape {} of {} needs {}",
                                              e.end - e.begin, shape.dump(), e.dtype_code, bytes));
    return false;
  }
  return true;
}

// One tensor entry {dtype, shape, data_offsets}; nullopt when any check fails (each reported,
// in the order above).
std::optional<SafetensorsEntry> read_entry(const std::string& name, const Json& v,
                                           std::uint64_t data_bytes, const Reporter& fail) {
  const std::string where = JsonPath().key(name).str();
  if (!v.is_object()) {
    fail(where,
         fmt::format("expected an object {{dtype, shape, data_offsets}}, found {}", json_kind(v)));
    return std::nullopt;
  }
  const bool fields_ok = known_fields_only(v, where, fail);
  SafetensorsEntry e;
  e.name = name;
  const CodeInfo* info = read_dtype(v, where, fail, e);
  if (info == nullptr) return std::nullopt;
  const auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) {
    fail(where, "missing or non-array 'shape'");
    return std::nullopt;
  }
  const auto numel = read_shape(*sh, where, fail, e);
  if (!numel || !read_offsets(v, where, data_bytes, fail, e) ||
      !size_matches(e, *info, *numel, *sh, where, fail) || !fields_ok) {
    return std::nullopt;
  }
  return e;
}

// Whether the entries tile the data section: no overlaps, no holes.
bool tiles_data_section(const SafetensorsHeader& h, const Reporter& fail) {
  std::vector<const SafetensorsEntry*> sorted;
  for (const auto& t : h.tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  bool ok = true;
  std::uint64_t pos = 0;
  for (const auto* t : sorted) {
    if (t->begin < pos) {
      fail(JsonPath().key(t->name).str(),
           fmt::format("data [{}, {}) overlaps another tensor", t->begin, t->end));
      ok = false;
    } else if (t->begin > pos) {
      fail(JsonPath().key(t->name).str(),
           fmt::format("bytes [{}, {}) before it belong to no tensor", pos, t->begin));
      ok = false;
    }
    pos = std::max(pos, t->end);
  }
  if (ok && pos != h.data_bytes) {
    fail({}, fmt::format("the last {} bytes of the data section belong to no tensor",
                         h.data_bytes - pos));
    ok = false;
  }
  return ok;
}

}  // namespace

std::optional<SafetensorsHeader> parse_safetensors_header(std::string_view prefix,
                                                          std::uint64_t file_size,
                                                          const std::string& file,
                                                          Diagnostics& diag) {
  const Reporter fail{file, diag};
  SafetensorsHeader h;
  const auto text = header_text(prefix, file_size, fail, h);
  if (!text) return std::nullopt;
  Diagnostics parse_diag;
  auto j = parse_json(*text, file + " (header)", parse_diag);
  if (!j) {
    diag.append(parse_diag);
    return std::nullopt;
  }
  if (!j->is_object()) {
    fail("$", "header is not a JSON object");
    return std::nullopt;
  }
  bool ok = true;
  for (auto it = j->begin(); it != j->end(); ++it) {
    if (it.key() == "__metadata__") {
      ok = read_metadata(it.key(), it.value(), fail, h) && ok;
    } else if (auto e = read_entry(it.key(), it.value(), h.data_bytes, fail)) {
      h.tensors.push_back(std::move(*e));
    } else {
      ok = false;
    }
  }
  if (!ok || !tiles_data_section(h, fail)) return std::nullopt;
  return h;
}

std::optional<SafetensorsHeader> read_safetensors_header(const std::string& path,
                                                         Diagnostics& diag) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    diag.error(path, {},
               e == ENOENT  ? std::string("file not found")
               : e == ELOOP ? std::string("symbolic link loop")
                            : fmt::format("cannot open: {}", std::strerror(e)));
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    diag.error(path, {}, "not a regular file");
    ::close(fd);
    return std::nullopt;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  std::string buf(8, '\0');
  auto read_at = [&](char* dst, std::size_t len, off_t at) {
    std::size_t got = 0;
    while (got < len) {
      const ssize_t r = ::pread(fd, dst + got, len - got, at + static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += static_cast<std::size_t>(r);
    }
    return true;
  };
  if (size < 8 || !read_at(buf.data(), 8, 0)) {
    ::close(fd);
    return parse_safetensors_header(std::string_view(buf.data(), size < 8 ? size : 8), size, path,
                                    diag);
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(buf[static_cast<std::size_t>(i)]);
  if (n <= kMaxSafetensorsHeaderBytes && n <= size - 8) {
    buf.resize(8 + static_cast<std::size_t>(n));
    if (!read_at(buf.data() + 8, static_cast<std::size_t>(n), 8)) {
      ::close(fd);
      diag.error(path, {}, "cannot read the header");
      return std::nullopt;
    }
  }
  ::close(fd);
  return parse_safetensors_header(buf, size, path, diag);
}

}  // namespace fib

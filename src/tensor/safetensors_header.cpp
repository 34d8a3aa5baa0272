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

std::optional<SafetensorsHeader> parse_safetensors_header(std::string_view prefix,
                                                          std::uint64_t file_size,
                                                          const std::string& file,
                                                          Diagnostics& diag) {
  auto fail = [&](std::string path, std::string msg) {
    diag.error(file, std::move(path), std::move(msg));
    return std::nullopt;
  };
  if (file_size < 8 || prefix.size() < 8) {
    return fail({}, fmt::format("not a safetensors file: {} bytes, shorter than the 8-byte header "
                                "length",
                                file_size));
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(prefix[static_cast<std::size_t>(i)]);
  if (n > kMaxSafetensorsHeaderBytes) {
    return fail({}, fmt::format("header length {} exceeds the {} byte limit (corrupt or not a "
                                "safetensors file)",
                                n, kMaxSafetensorsHeaderBytes));
  }
  if (n > file_size - 8) {
    return fail(
        {}, fmt::format("header length {} runs past the end of the {}-byte file", n, file_size));
  }
  if (prefix.size() < 8 + n) {
    return fail({}, "header is truncated");
  }
  SafetensorsHeader h;
  h.header_bytes = n;
  h.data_bytes = file_size - 8 - n;
  std::string_view text = prefix.substr(8, static_cast<std::size_t>(n));
  // The format allows trailing spaces as padding.
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty() || text.front() != '{') {
    return fail({}, "header does not start with '{'");
  }
  Diagnostics parse_diag;
  auto j = parse_json(text, file + " (header)", parse_diag);
  if (!j) {
    diag.append(parse_diag);
    return std::nullopt;
  }
  if (!j->is_object()) return fail("$", "header is not a JSON object");
  bool ok = true;
  for (auto it = j->begin(); it != j->end(); ++it) {
    const std::string& name = it.key();
    const std::string where = JsonPath().key(name).str();
    const Json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) {
        fail(where, "__metadata__ must be an object of string -> string");
        ok = false;
        continue;
      }
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          fail(JsonPath().key(name).key(m.key()).str(), "metadata values must be strings");
          ok = false;
        } else {
          h.metadata.emplace_back(m.key(), m.value().get<std::string>());
        }
      }
      continue;
    }
    if (!v.is_object()) {
      fail(where, fmt::format("expected an object {{dtype, shape, data_offsets}}, found {}",
                              json_kind(v)));
      ok = false;
      continue;
    }
    SafetensorsEntry e;
    e.name = name;
    const auto dt = v.find("dtype");
    const auto sh = v.find("shape");
    const auto off = v.find("data_offsets");
    for (auto k = v.begin(); k != v.end(); ++k) {
      if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets") {
        fail(where, fmt::format("unknown field '{}' in tensor entry", k.key()));
        ok = false;
      }
    }
    if (dt == v.end() || !dt->is_string()) {
      fail(where, "missing or non-string 'dtype'");
      ok = false;
      continue;
    }
    e.dtype_code = dt->get<std::string>();
    const CodeInfo* info = code_info(e.dtype_code);
    if (info == nullptr) {
      fail(where + ".dtype", fmt::format("unknown safetensors dtype '{}'", e.dtype_code));
      ok = false;
      continue;
    }
    e.dtype = info->dtype;
    if (sh == v.end() || !sh->is_array()) {
      fail(where, "missing or non-array 'shape'");
      ok = false;
      continue;
    }
    std::uint64_t numel = 1;
    bool shape_ok = true;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0)) {
        fail(where + ".shape", fmt::format("dimension {} is not a non-negative integer", d.dump()));
        shape_ok = false;
        break;
      }
      const std::uint64_t dim = d.get<std::uint64_t>();
      if (dim > static_cast<std::uint64_t>(INT64_MAX) || !checked_mul(numel, dim, numel)) {
        fail(where + ".shape", "the element count overflows 64 bits");
        shape_ok = false;
        break;
      }
      e.shape.push_back(static_cast<std::int64_t>(dim));
    }
    if (!shape_ok) {
      ok = false;
      continue;
    }
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned()) {
      fail(where, "'data_offsets' must be [begin, end] with non-negative integers");
      ok = false;
      continue;
    }
    e.begin = (*off)[0].get<std::uint64_t>();
    e.end = (*off)[1].get<std::uint64_t>();
    if (e.begin > e.end) {
      fail(where + ".data_offsets", fmt::format("begin {} is after end {}", e.begin, e.end));
      ok = false;
      continue;
    }
    if (e.end > h.data_bytes) {
      fail(where + ".data_offsets",
           fmt::format("end {} lies past the data section ({} bytes)", e.end, h.data_bytes));
      ok = false;
      continue;
    }
    std::uint64_t bits = 0, bytes = 0;
    if (!checked_mul(numel, static_cast<std::uint64_t>(info->bits), bits)) {
      fail(where, "the byte size overflows 64 bits");
      ok = false;
      continue;
    }
    bytes = bits / 8 + (bits % 8 ? 1 : 0);
    if (e.end - e.begin != bytes) {
      fail(where + ".data_offsets", fmt::format("holds {} bytes but shape {} of {} needs {}",
                                                e.end - e.begin, sh->dump(), e.dtype_code, bytes));
      ok = false;
      continue;
    }
    h.tensors.push_back(std::move(e));
  }
  if (ok) {
    // Entries must tile the data section: no overlaps, no holes.
    std::vector<const SafetensorsEntry*> sorted;
    for (const auto& t : h.tensors) sorted.push_back(&t);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
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
  }
  if (!ok) return std::nullopt;
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

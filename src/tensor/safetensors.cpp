#include "fib/tensor/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "fib/base/files.h"
#include "fib/trace/suggest.h"

namespace fib {

namespace fs = std::filesystem;

// The format is little-endian and fib copies bytes straight between files and tensors.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;  // closes its descriptor exactly once
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

std::string json_string(const std::string& s, const fs::path& path) {
  try {
    return nlohmann::json(s).dump();
  } catch (const nlohmann::json::exception&) {
    throw Error(path.string(), fmt::format("'{}' is not valid UTF-8, which a safetensors header "
                                           "(JSON) requires",
                                           s));
  }
}

std::string make_header(const std::vector<std::pair<std::string, Tensor>>& tensors,
                        const std::map<std::string, std::string>& metadata, const fs::path& path,
                        std::size_t alignment) {
  std::string h = "{";
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) h += ',';
      first = false;
      h += json_string(k, path) + ':' + json_string(v, path);
    }
    h += '}';
  }
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (h.size() > 1) h += ',';
    h += json_string(name, path);
    h += fmt::format(R"(:{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})",
                     safetensors_code(t.dtype()), fmt::join(t.shape(), ","), offset,
                     offset + t.nbytes());
    offset += t.nbytes();
  }
  h += '}';
  // The format's own writer pads with spaces so the data section starts 8-byte aligned, which
  // lets readers map tensors in place; a larger alignment pads the same way (8 + header length
  // is then a multiple of it).
  h.append((alignment - (8 + h.size()) % alignment) % alignment, ' ');
  return h;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const fs::path& path) {
  const std::string name = path.string();
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int e = errno;
    throw Error(name, e == ENOENT  ? std::string("file not found")
                      : e == ELOOP ? std::string("symbolic link loop")
                                   : fmt::format("cannot open: {}", std::strerror(e)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) throw Error(name, "not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  SafetensorsFile f;
  f.path_ = path;
  if (size > 0) {
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (m == MAP_FAILED) {
      throw Error(name, fmt::format("cannot map {} bytes: {}", size, std::strerror(errno)));
    }
    f.map_ = static_cast<const std::byte*>(m);
    f.map_size_ = static_cast<std::size_t>(size);
  }
  // From here `f` owns the map and unmaps it if validation throws.
  Diagnostics diag;
  const std::string_view bytes(static_cast<const char*>(static_cast<const void*>(f.map_)),
                               f.map_size_);
  auto header = parse_safetensors_header(bytes, size, name, diag);
  if (!header) throw Error(std::move(diag));
  f.header_ = std::move(*header);
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      header_(std::move(other.header_)),
      map_(std::exchange(other.map_, nullptr)),
      map_size_(std::exchange(other.map_size_, 0)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), map_size_);
    path_ = std::move(other.path_);
    header_ = std::move(other.header_);
    map_ = std::exchange(other.map_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), map_size_);
}

std::vector<std::string> SafetensorsFile::keys() const {
  std::vector<std::string> out;
  out.reserve(header_.tensors.size());
  for (const auto& t : header_.tensors) out.push_back(t.name);
  return out;
}

bool SafetensorsFile::contains(const std::string& key) const {
  return header_.find(key) != nullptr;
}

Tensor SafetensorsFile::read(const std::string& key) const {
  const SafetensorsEntry* e = header_.find(key);
  if (e == nullptr) {
    const std::vector<std::string> names = keys();
    throw Error(path_.string(), fmt::format("no tensor named '{}'", key), suggest(key, names));
  }
  if (!e->dtype) {
    throw Error(path_.string(),
                fmt::format("tensor '{}' has safetensors dtype {}, which has no FlashInfer-Trace "
                            "dtype",
                            key, e->dtype_code));
  }
  Tensor t(*e->dtype, e->shape);
  // The header check guarantees the entry's bytes are exactly the tensor's storage size.
  if (t.nbytes() > 0) std::memcpy(t.raw(), map_ + header_.data_offset() + e->begin, t.nbytes());
  return t;
}

void write_safetensors(const fs::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_safetensors(path, tensors, metadata, SafetensorsWriteOptions{});
}

void write_safetensors(const fs::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& given,
                       const std::map<std::string, std::string>& metadata,
                       const SafetensorsWriteOptions& options) {
  const std::size_t alignment = options.alignment;
  if (alignment < 8 || (alignment & (alignment - 1)) != 0) {
    throw Error(path.string(),
                fmt::format("alignment {} is not a power of two of at least 8", alignment));
  }
  // Padding entries ("__pad.N", uint8) keep every tensor's offset aligned: the format has no
  // holes in its data section, so the gaps must be tensors too.
  std::vector<std::pair<std::string, Tensor>> padded;
  const auto* list = &given;
  if (alignment > 8) {
    std::uint64_t offset = 0;
    int pads = 0;
    for (const auto& entry : given) {
      if (const std::uint64_t gap = (alignment - offset % alignment) % alignment; gap > 0) {
        padded.emplace_back(fmt::format("__pad.{}", pads++),
                            Tensor(DType::kUInt8, {static_cast<std::int64_t>(gap)}));
        offset += gap;
      }
      padded.push_back(entry);
      offset += entry.second.defined() ? entry.second.nbytes() : 0;
    }
    list = &padded;
  }
  const auto& tensors = *list;
  std::set<std::string_view> seen;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) throw Error(path.string(), "a tensor name must not be empty");
    if (name == "__metadata__") {
      throw Error(path.string(), "'__metadata__' is reserved and cannot name a tensor");
    }
    if (!seen.insert(name).second) {
      throw Error(path.string(), fmt::format("tensor name '{}' appears twice", name));
    }
    if (!t.defined()) throw Error(path.string(), fmt::format("tensor '{}' is undefined", name));
  }
  const std::string header = make_header(tensors, metadata, path, alignment);
  std::uint64_t n = header.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xFF);

  write_file_atomic(path,
                    [&](int fd, const fs::path& tmp) {
                      write_all(fd, len, sizeof len, tmp.string());
                      write_all(fd, header.data(), header.size(), tmp.string());
                      for (const auto& [name, t] : tensors)
                        write_all(fd, t.raw(), t.nbytes(), tmp.string());
                    },
                    {.durable = options.durable});
}

}  // namespace fib

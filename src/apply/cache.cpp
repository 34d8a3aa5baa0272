#include "fib/apply/cache.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "fib/apply/test_hooks.h"
#include "fib/base/files.h"

namespace fib::apply {

namespace fs = std::filesystem;

namespace {

// SHA-256 fed piece by piece.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) {
      throw Error("apply table cache", "SHA-256 could not be started");
    }
  }
  void add(std::string_view bytes) { EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()); }
  // Length-prefixed, so two fields can never run into each other.
  void field(std::string_view bytes) {
    add(fmt::format("{}:", bytes.size()));
    add(bytes);
  }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &n);
    std::string s;
    for (unsigned int i = 0; i < n; ++i) s += fmt::format("{:02x}", md[i]);
    return s;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

bool hidden(const fs::path& relative) {
  return std::any_of(relative.begin(), relative.end(),
                     [](const fs::path& part) { return part.string().starts_with("."); });
}

// The dataset's record files, relative to the root, sorted.
std::vector<fs::path> record_files(const fs::path& root) {
  std::vector<fs::path> files;
  for (const char* folder : {"definitions", "solutions", "traces"}) {
    std::error_code ec;
    if (!fs::is_directory(root / folder, ec)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / folder)) {
      const fs::path rel = fs::relative(e.path(), root);
      if (e.is_regular_file() && !hidden(rel)) files.push_back(rel);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

void add_file(Sha256& h, const fs::path& root, const fs::path& rel) {
  std::ifstream in(root / rel, std::ios::binary);
  if (!in) throw Error((root / rel).string(), "cannot be read", "check its permissions");
  std::stringstream bytes;
  bytes << in.rdbuf();
  h.field(rel.generic_string());
  h.field(bytes.str());
}

std::optional<ApplyTable> read_cached(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  Diagnostics diag;
  const auto j = read_json_file(file.string(), diag);
  if (!j) return std::nullopt;
  try {
    return table_from_json(*j, file.string());
  } catch (const Error&) {
    return std::nullopt;  // another version, or damaged: made again
  }
}

}  // namespace

fs::path default_table_cache_dir() {
  if (const char* dir = std::getenv("FIB_APPLY_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return fs::path(xdg) / "fib" / "apply";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : "/tmp") / ".cache" / "fib" / "apply";
}

std::string dataset_digest(const fs::path& dataset, const ApplyOptions& options) {
  Sha256 h;
  h.field(fmt::format("fib apply table v{}", kTableFormatVersion));
  ApplyTable empty;
  empty.options = options;
  h.field(dump_json_line(to_json(empty)["options"]));
  h.field(test_hooks::digest_check() ? "digest check" : "no digest check");
  h.field(fs::absolute(dataset).string());  // the table names files under it
  for (const fs::path& rel : record_files(dataset)) add_file(h, dataset, rel);
  return "sha256:" + h.hex();
}

CachedTable load_or_build(const fs::path& dataset, const ApplyOptions& options,
                          const fs::path& cache_dir, Diagnostics& diag) {
  const std::string digest = dataset_digest(dataset, options);
  CachedTable out;
  out.file = cache_dir / (digest.substr(digest.find(':') + 1) + ".json");
  if (auto cached = read_cached(out.file); cached && cached->dataset_digest == digest) {
    out.table = std::move(*cached);
    out.table.dataset = fs::absolute(dataset);
    resolve_artifacts(out.table, options.build_cache);
    out.from_cache = true;
    return out;
  }
  const TraceSet set = TraceSet::load(dataset);
  diag.append(set.load_diagnostics());
  out.table = build_table(set, options);
  out.table.dataset_digest = digest;
  // A dataset written to while it was read is not stored under the digest of what was before.
  if (dataset_digest(dataset, options) == digest) {
    write_file_atomic(out.file, dump_json_pretty(to_json(out.table)), {.durable = false});
  }
  return out;
}

}  // namespace fib::apply

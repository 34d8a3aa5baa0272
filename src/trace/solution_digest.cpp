#include "fib/trace/solution_digest.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include "fib/base/diagnostics.h"
#include "fib/base/json.h"
#include "fib/trace/signature.h"

namespace fib {

std::string solution_digest(const Solution& s) {
  // Digested as it is read back from a file: the record fib writes, parsed again.
  const std::string text = canonical_trace_text(Json::parse(dump_json_line(to_json(s))));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(text.data(), text.size(), md, &n, EVP_sha256(), nullptr) != 1) {
    throw Error(s.name, "SHA-256 of the solution failed");
  }
  std::string hex = "sha256:";
  for (unsigned int i = 0; i < n; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

}  // namespace fib

// Trace signatures: the Ed25519 signature `fib run` puts on every trace it writes, so that a
// line a solution (or anyone else) appends to a dataset cannot pass for fib's (docs/traces.md).
//
// Where it lives: evaluation.environment.extra.signature, an object
//   {"algorithm": "ed25519", "key_id": <hex SHA-256 of the raw public key>,
//    "public_key": <base64 of the 32-byte raw public key>, "value": <base64 of the signature>}
// (upstream's Environment ignores fields it does not declare, so a signed line stays a valid
// upstream trace).
//
// What is signed: kSignedPrefix followed by the record's canonical text, which is the whole
// record with that one "signature" member removed (its "extra" object stays, even when empty),
// written as nlohmann::json writes it: object keys sorted by their UTF-8 bytes at every level, no
// whitespace, non-ASCII characters as raw UTF-8, numbers as parsed from the line (integers in
// decimal, floating-point numbers in their shortest round-trip form).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fib/trace/json_reader.h"
#include "fib/trace/trace.h"

namespace fib {

inline constexpr std::string_view kSignatureField = "signature";
inline constexpr std::string_view kSignatureAlgorithm = "ed25519";
// Domain separation: a trace signature can never be replayed as a signature over anything else.
inline constexpr std::string_view kSignedPrefix = "fib trace signature v1\n";

// An Ed25519 public key: the key that verifies a signature.
struct PublicKey {
  std::array<std::uint8_t, 32> raw{};

  std::string base64() const;
  std::string key_id() const;  // hex SHA-256 of raw, 64 characters
  // "ed25519 <base64> [comment]": one line of a trusted-keys file.
  std::string line(std::string_view comment = {}) const;
  // Reads a line as line() writes it (the comment is ignored); nullopt when it is not one.
  static std::optional<PublicKey> parse_line(std::string_view text);
  static std::optional<PublicKey> from_base64(std::string_view text);
};

// An Ed25519 private key that signs traces. Copies share the key.
class SigningKey {
 public:
  static SigningKey generate();
  // From the 32-byte private key (the seed); tests use fixed ones.
  static SigningKey from_seed(const std::array<std::uint8_t, 32>& seed);
  // From a PKCS#8 PEM text (what to_pem writes); throws fib::Error naming `where`.
  static SigningKey from_pem(std::string_view pem, const std::string& where);
  std::string to_pem() const;

  const PublicKey& public_key() const { return public_key_; }
  // The Ed25519 signature (64 bytes) of `message`.
  std::string sign(std::string_view message) const;

 private:
  struct Key;
  explicit SigningKey(std::shared_ptr<Key> key);
  std::shared_ptr<Key> key_;
  PublicKey public_key_;
};

// The canonical text of a record (above), the signature member left out.
std::string canonical_trace_text(const Json& record);

// Signs an evaluation trace as it will be written (to_json, one line): sets
// evaluation.environment.extra.signature and t.signer. Throws fib::Error for a workload record
// (no evaluation to carry the signature).
void sign_trace(Trace& t, const SigningKey& key);

// Checks the signature of a parsed trace line, when it carries one. Returns the signer's key id
// when it verifies, "" when the record is unsigned, and nullopt after reporting why through
// `ctx` when the record carries a signature that is malformed or does not verify.
std::optional<std::string> verify_trace_signature(const Json& record, const ReadContext& ctx);

}  // namespace fib

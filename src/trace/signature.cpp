#include "fib/trace/signature.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "fib/base/json.h"
#include "fib/trace/json_reader.h"

namespace fib {

namespace {

constexpr std::string_view kBase64Alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(const std::uint8_t* data, std::size_t n) {
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (std::size_t i = 0; i < n; i += 3) {
    const std::uint32_t b0 = data[i];
    const std::uint32_t b1 = i + 1 < n ? data[i + 1] : 0;
    const std::uint32_t b2 = i + 2 < n ? data[i + 2] : 0;
    const std::uint32_t v = (b0 << 16) | (b1 << 8) | b2;
    out.push_back(kBase64Alphabet[(v >> 18) & 63]);
    out.push_back(kBase64Alphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < n ? kBase64Alphabet[(v >> 6) & 63] : '=');
    out.push_back(i + 2 < n ? kBase64Alphabet[v & 63] : '=');
  }
  return out;
}

// Strict standard base64 with padding: exactly one spelling per byte string, so a signature
// cannot be re-encoded into a different line that still verifies.
std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint32_t v = 0;
    int pad = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      std::uint32_t d = 0;
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
      } else {
        if (pad > 0) return std::nullopt;  // data after padding
        const auto at = kBase64Alphabet.find(c);
        if (at == std::string_view::npos) return std::nullopt;
        d = static_cast<std::uint32_t>(at);
      }
      v = (v << 6) | d;
    }
    // Unused bits before the padding must be zero.
    if ((pad == 1 && (v & 0xFF) != 0) || (pad == 2 && (v & 0xFFFF) != 0)) return std::nullopt;
    out.push_back(static_cast<char>((v >> 16) & 0xFF));
    if (pad < 2) out.push_back(static_cast<char>((v >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(v & 0xFF));
  }
  return out;
}

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

struct PkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;
struct BioDeleter {
  void operator()(BIO* p) const { BIO_free(p); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

PublicKey public_key_of(EVP_PKEY* pkey) {
  PublicKey k;
  std::size_t n = k.raw.size();
  if (EVP_PKEY_get_raw_public_key(pkey, k.raw.data(), &n) != 1 || n != k.raw.size()) {
    throw Error("signing key", fmt::format("cannot read the public key: {}", openssl_error()));
  }
  return k;
}

bool verify_ed25519(const PublicKey& key, std::string_view message, std::string_view signature) {
  PkeyPtr pub(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, key.raw.data(), key.raw.size()));
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!pub || !ctx) return false;
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pub.get()) != 1) return false;
  const int ok = EVP_DigestVerify(
      ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
      reinterpret_cast<const unsigned char*>(message.data()), message.size());
  ERR_clear_error();
  return ok == 1;
}

// The same value as nlohmann::json (objects keyed by std::map, so sorted by bytes), types kept.
nlohmann::json sorted_copy(const Json& j) {
  switch (j.type()) {
    case Json::value_t::object: {
      nlohmann::json o = nlohmann::json::object();
      for (auto it = j.begin(); it != j.end(); ++it) o[it.key()] = sorted_copy(it.value());
      return o;
    }
    case Json::value_t::array: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& v : j) a.push_back(sorted_copy(v));
      return a;
    }
    case Json::value_t::string:
      return j.get_ref<const std::string&>();
    case Json::value_t::boolean:
      return j.get<bool>();
    case Json::value_t::number_integer:
      return j.get<std::int64_t>();
    case Json::value_t::number_unsigned:
      return j.get<std::uint64_t>();
    case Json::value_t::number_float:
      return j.get<double>();
    default:  // null; a parsed line holds no binary or discarded values
      return nullptr;
  }
}

// evaluation.environment.extra of a record, when each level is an object.
template <typename J>
J* extra_of(J& record) {
  J* at = &record;
  for (const char* key : {"evaluation", "environment", "extra"}) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at->is_object() ? at : nullptr;
}

std::string signed_message(const Json& record) {
  return std::string(kSignedPrefix) + canonical_trace_text(record);
}

struct SignatureFields {
  std::string algorithm, key_id, public_key, value;
};

std::optional<SignatureFields> read_signature(const Json& sig, const JsonPath& p,
                                              const ReadContext& ctx) {
  static constexpr std::string_view kFields[] = {"algorithm", "key_id", "public_key", "value"};
  const Json* f[4];
  if (!read_object(sig, p, ctx, kFields, f, nullptr)) return std::nullopt;
  std::string* out[4];
  SignatureFields s;
  out[0] = &s.algorithm;
  out[1] = &s.key_id;
  out[2] = &s.public_key;
  out[3] = &s.value;
  bool ok = true;
  for (std::size_t i = 0; i < 4; ++i) {
    if (!require_field(f[i], kFields[i], p, ctx)) {
      ok = false;
    } else if (auto v = read_string(*f[i], p.key(kFields[i]), ctx, false)) {
      *out[i] = std::move(*v);
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return s;
}

}  // namespace

std::string PublicKey::base64() const { return base64_encode(raw.data(), raw.size()); }

std::string PublicKey::key_id() const {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(raw.data(), raw.size(), md, &n, EVP_sha256(), nullptr) != 1) {
    throw Error("signing key", fmt::format("SHA-256 failed: {}", openssl_error()));
  }
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

std::string PublicKey::line(std::string_view comment) const {
  std::string s = fmt::format("{} {}", kSignatureAlgorithm, base64());
  if (!comment.empty()) s += fmt::format(" {}", comment);
  return s;
}

std::optional<PublicKey> PublicKey::from_base64(std::string_view text) {
  auto bytes = base64_decode(text);
  PublicKey k;
  if (!bytes || bytes->size() != k.raw.size()) return std::nullopt;
  std::copy(bytes->begin(), bytes->end(), k.raw.begin());
  return k;
}

std::optional<PublicKey> PublicKey::parse_line(std::string_view text) {
  auto word = [&text]() {
    const auto start = text.find_first_not_of(" \t");
    if (start == std::string_view::npos) return std::string_view();
    text.remove_prefix(start);
    const auto end = std::min(text.find_first_of(" \t"), text.size());
    const std::string_view w = text.substr(0, end);
    text.remove_prefix(end);
    return w;
  };
  if (word() != kSignatureAlgorithm) return std::nullopt;
  return from_base64(word());
}

struct SigningKey::Key {
  PkeyPtr pkey;
};

SigningKey::SigningKey(std::shared_ptr<Key> key)
    : key_(std::move(key)), public_key_(public_key_of(key_->pkey.get())) {}

SigningKey SigningKey::generate() {
  PkeyPtr pkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!pkey) {
    throw Error("signing key", fmt::format("cannot make an Ed25519 key: {}", openssl_error()));
  }
  return SigningKey(std::make_shared<Key>(Key{std::move(pkey)}));
}

SigningKey SigningKey::from_seed(const std::array<std::uint8_t, 32>& seed) {
  PkeyPtr pkey(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size()));
  if (!pkey) {
    throw Error("signing key", fmt::format("cannot make an Ed25519 key: {}", openssl_error()));
  }
  return SigningKey(std::make_shared<Key>(Key{std::move(pkey)}));
}

SigningKey SigningKey::from_pem(std::string_view pem, const std::string& where) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr pkey(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!pkey) {
    throw Error(where, fmt::format("not a PEM private key: {}", openssl_error()),
                "move the file aside; fib makes a new key where none exists");
  }
  if (EVP_PKEY_get_base_id(pkey.get()) != EVP_PKEY_ED25519) {
    throw Error(where, "the private key is not an Ed25519 key", "fib signs traces with Ed25519");
  }
  return SigningKey(std::make_shared<Key>(Key{std::move(pkey)}));
}

std::string SigningKey::to_pem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key_->pkey.get(), nullptr, nullptr, 0, nullptr,
                                       nullptr) != 1) {
    throw Error("signing key", fmt::format("cannot write the key: {}", openssl_error()));
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string SigningKey::sign(std::string_view message) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  unsigned char sig[64];
  std::size_t n = sizeof sig;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &n, reinterpret_cast<const unsigned char*>(message.data()),
                     message.size()) != 1) {
    throw Error("signing key", fmt::format("signing failed: {}", openssl_error()));
  }
  return std::string(reinterpret_cast<const char*>(sig), n);
}

std::string canonical_trace_text(const Json& record) {
  nlohmann::json sorted = sorted_copy(record);
  if (nlohmann::json* extra = extra_of(sorted)) extra->erase(std::string(kSignatureField));
  return sorted.dump();
}

void sign_trace(Trace& t, const SigningKey& key) {
  if (!t.evaluation) {
    throw Error(t.definition, "a workload record has no evaluation to carry a signature");
  }
  Json& extra = t.evaluation->environment.extra;
  if (!extra.is_object()) extra = Json::object();
  extra.erase(std::string(kSignatureField));
  // Signed as it will be read back: the line fib writes, parsed again.
  const Json written = Json::parse(dump_json_line(to_json(t)));
  const std::string value = key.sign(signed_message(written));
  const PublicKey& pub = key.public_key();
  Json sig = Json::object();
  sig["algorithm"] = kSignatureAlgorithm;
  sig["key_id"] = pub.key_id();
  sig["public_key"] = pub.base64();
  sig["value"] = base64_encode(reinterpret_cast<const std::uint8_t*>(value.data()), value.size());
  extra[std::string(kSignatureField)] = std::move(sig);
  t.signer = pub.key_id();
}

std::optional<std::string> verify_trace_signature(const Json& record, const ReadContext& ctx) {
  const Json* extra = extra_of(record);
  if (extra == nullptr) return std::string();
  auto it = extra->find(std::string(kSignatureField));
  if (it == extra->end()) return std::string();
  const JsonPath root;
  const JsonPath evaluation = root.key("evaluation");
  const JsonPath environment = evaluation.key("environment");
  const JsonPath extra_path = environment.key("extra");
  const JsonPath p = extra_path.key(kSignatureField);
  auto sig = read_signature(*it, p, ctx);
  if (!sig) return std::nullopt;
  if (sig->algorithm != kSignatureAlgorithm) {
    ctx.error(p.key("algorithm"),
              fmt::format("unknown signature algorithm '{}' (fib signs with '{}')", sig->algorithm,
                          kSignatureAlgorithm));
    return std::nullopt;
  }
  const auto pub = PublicKey::from_base64(sig->public_key);
  if (!pub) {
    ctx.error(p.key("public_key"), "not the base64 of a 32-byte Ed25519 public key");
    return std::nullopt;
  }
  if (pub->key_id() != sig->key_id) {
    ctx.error(p.key("key_id"), "the key id is not the SHA-256 of the public key beside it");
    return std::nullopt;
  }
  const auto value = base64_decode(sig->value);
  if (!value || value->size() != 64) {
    ctx.error(p.key("value"), "not the base64 of a 64-byte Ed25519 signature");
    return std::nullopt;
  }
  if (!verify_ed25519(*pub, signed_message(record), *value)) {
    ctx.error(p,
              fmt::format("the signature does not verify: this line is not the one key {} "
                          "signed (changed after fib wrote it, or forged)",
                          sig->key_id.substr(0, 16)),
              "a trace that claims to be fib's must hold exactly what fib signed; rerun the "
              "evaluation to get a genuine trace");
    return std::nullopt;
  }
  return sig->key_id;
}

}  // namespace fib

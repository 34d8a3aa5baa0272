// Trace signatures: the canonical text and the Ed25519 signature of a fixed key on a fixed
// record match what Python's json module and the openssl command line compute independently;
// a signed line verifies however it is formatted, and fails once any byte of it changes.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "fib/base/json.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/signature.h"
#include "fib/trace/trace.h"

namespace fib {
namespace {

// Private key 00 01 02 ... 1f.
SigningKey test_key() {
  std::array<std::uint8_t, 32> seed{};
  for (std::size_t i = 0; i < seed.size(); ++i) seed[i] = static_cast<std::uint8_t>(i);
  return SigningKey::from_seed(seed);
}

SigningKey other_key() {
  std::array<std::uint8_t, 32> seed{};
  seed.fill(7);
  return SigningKey::from_seed(seed);
}

constexpr std::string_view kRecord =
    R"({"definition":"gemm_n8","solution":"gemm_n8_naive","workload":{"uuid":"w-1","axes":{"M":4},)"
    R"("inputs":{"A":{"type":"random"}}},"evaluation":{"status":"PASSED","environment":{)"
    R"("hardware":"cpu","libs":{"fib":"0.1.0"},"extra":{"seed":5,"host":"h\u00e9"}},)"
    R"("timestamp":"2026-01-01T00:00:00Z","log":"ok\n","correctness":{"max_relative_error":0.001,)"
    R"("max_absolute_error":0.0},"performance":{"latency_ms":1.25,"reference_latency_ms":2.5,)"
    R"("speedup_factor":2.0}}})";

// python3: json.dumps(json.loads(kRecord), sort_keys=True, separators=(',', ':'),
// ensure_ascii=False)
constexpr std::string_view kCanonical =
    R"({"definition":"gemm_n8","evaluation":{"correctness":{"max_absolute_error":0.0,)"
    R"("max_relative_error":0.001},"environment":{"extra":{"host":"hé","seed":5},)"
    R"("hardware":"cpu","libs":{"fib":"0.1.0"}},"log":"ok\n","performance":{"latency_ms":1.25,)"
    R"("reference_latency_ms":2.5,"speedup_factor":2.0},"status":"PASSED",)"
    R"("timestamp":"2026-01-01T00:00:00Z"},"solution":"gemm_n8_naive","workload":{"axes":{"M":4},)"
    R"("inputs":{"A":{"type":"random"}},"uuid":"w-1"}})";

// openssl pkey -pubout of the test key (raw, base64) and its sha256sum.
constexpr std::string_view kPublicKey = "A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=";
constexpr std::string_view kKeyId =
    "56475aa75463474c0285df5dbf2bcab73da651358839e9b77481b2eab107708c";
// openssl pkeyutl -sign -rawin -inkey <test key> over kSignedPrefix + kCanonical, base64.
constexpr std::string_view kSignature =
    "xp5RrhQ1IUnY+Jnjsyy0Ta2EmoOZz7dt0Vi0jet8CasHgS0cAempyOSh9iCAzs928AEZYLNS/E3r3n9BmiqWCg==";

Trace parse_trace(std::string_view line, Diagnostics& diag) {
  auto j = parse_json(line, "t.jsonl:1", diag);
  EXPECT_TRUE(j) << diag.to_string();
  auto t = trace_from_json(*j, ReadContext{"t.jsonl:1", &diag});
  EXPECT_TRUE(t) << diag.to_string();
  return t ? *t : Trace{};
}

// The signed line of kRecord, as fib writes it.
std::string signed_line(const SigningKey& key) {
  Diagnostics diag;
  Trace t = parse_trace(kRecord, diag);
  sign_trace(t, key);
  return dump_json_line(to_json(t));
}

// Whether a line is accepted as a trace; `diag` gets the findings.
bool accepted(std::string_view line, Diagnostics& diag) {
  auto j = parse_json(line, "t.jsonl:1", diag);
  return j && trace_from_json(*j, ReadContext{"t.jsonl:1", &diag}).has_value();
}

TEST(TraceSignature, GoldenKeySignatureAndCanonicalText) {
  const SigningKey key = test_key();
  EXPECT_EQ(key.public_key().base64(), kPublicKey);
  EXPECT_EQ(key.public_key().key_id(), kKeyId);
  EXPECT_EQ(canonical_trace_text(Json::parse(kRecord)), kCanonical);

  const Json j = Json::parse(signed_line(key));
  const Json& sig = j["evaluation"]["environment"]["extra"]["signature"];
  EXPECT_EQ(sig["algorithm"], "ed25519");
  EXPECT_EQ(sig["key_id"], kKeyId);
  EXPECT_EQ(sig["public_key"], kPublicKey);
  EXPECT_EQ(sig["value"], kSignature);
  // The signature member is all that is left out of the canonical text.
  EXPECT_EQ(canonical_trace_text(j), kCanonical);
}

TEST(TraceSignature, SignedLineVerifiesAndNamesItsSigner) {
  Diagnostics diag;
  const Trace t = parse_trace(signed_line(test_key()), diag);
  EXPECT_TRUE(diag.empty()) << diag.to_string();
  EXPECT_EQ(t.signer, kKeyId);
  // Unsigned: accepted, no signer.
  const Trace plain = parse_trace(kRecord, diag);
  EXPECT_TRUE(diag.empty()) << diag.to_string();
  EXPECT_EQ(plain.signer, "");
}

TEST(TraceSignature, VerifiesWhateverTheFormattingAndKeyOrder) {
  const Json j = Json::parse(signed_line(test_key()));
  nlohmann::json sorted = nlohmann::json::parse(j.dump());  // keys in another order
  Diagnostics diag;
  EXPECT_EQ(parse_trace(sorted.dump(2), diag).signer, kKeyId) << diag.to_string();
}

// A flipped byte anywhere never leaves a line that verifies as signed by the key: it is refused,
// or (a flip in the member's name "signature") it no longer claims a signature and reads as
// unsigned, hence unverified.
TEST(TraceSignature, AnyFlippedByteLosesTheSignature) {
  const std::string line = signed_line(test_key());
  const std::size_t name_at = line.find("\"signature\"") + 1;
  std::size_t rejected_by_signature = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    std::string forged = line;
    forged[i] = static_cast<char>(forged[i] ^ 1);
    Diagnostics diag;
    auto j = parse_json(forged, "t.jsonl:1", diag);
    auto t = j ? trace_from_json(*j, ReadContext{"t.jsonl:1", &diag}) : std::nullopt;
    if (i >= name_at && i < name_at + kSignatureField.size()) {
      ASSERT_TRUE(t) << diag.to_string();
      EXPECT_EQ(t->signer, "") << "byte " << i;
      continue;
    }
    EXPECT_FALSE(t) << "byte " << i << " of " << forged;
    if (diag.to_string().find("signature") != std::string::npos) ++rejected_by_signature;
  }
  // Many flips leave a well-formed trace (in values, extras, the signature's own fields): the
  // signature is what catches those.
  EXPECT_GT(rejected_by_signature, line.size() / 4);
}

// Every scalar of the record changed, one at a time (what a forger edits: a latency, a status,
// a seed, a log), fails verification, and the line is refused.
TEST(TraceSignature, AnyChangedFieldFailsVerification) {
  const Json signed_json = Json::parse(signed_line(test_key()));
  std::size_t fields = 0;
  std::function<void(Json&, const std::function<void()>&)> each_scalar =
      [&](Json& node, const std::function<void()>& check) {
        if (node.is_object() || node.is_array()) {
          for (auto it = node.begin(); it != node.end(); ++it) {
            if (node.is_object() && it.key() == "signature") continue;
            each_scalar(*it, check);
          }
          return;
        }
        const Json saved = node;
        if (node.is_string()) {
          node = node.get<std::string>() + "x";
        } else if (node.is_number_integer()) {
          node = node.get<std::int64_t>() + 1;
        } else if (node.is_number()) {
          node = node.get<double>() + 0.5;
        } else if (node.is_boolean()) {
          node = !node.get<bool>();
        }
        check();
        node = saved;
      };
  Json forged = signed_json;
  each_scalar(forged, [&] {
    ++fields;
    const std::string line = dump_json_line(forged);
    Diagnostics diag;
    EXPECT_FALSE(verify_trace_signature(Json::parse(line), ReadContext{"t.jsonl:1", &diag}))
        << line;
    EXPECT_NE(diag.to_string().find("the signature does not verify"), std::string::npos)
        << diag.to_string();
    Diagnostics load_diag;
    EXPECT_FALSE(accepted(line, load_diag)) << line;
  });
  EXPECT_GE(fields, 15u);
}

TEST(TraceSignature, MalformedSignaturesAreRejectedWithTheReason) {
  const Json good = Json::parse(signed_line(test_key()));
  struct Case {
    std::function<void(Json&)> edit;
    std::string message;
  };
  const Case cases[] = {
      {[](Json& s) { s["algorithm"] = "rsa"; }, "unknown signature algorithm 'rsa'"},
      {[](Json& s) { s["key_id"] = std::string(64, '0'); }, "the key id is not the SHA-256"},
      {[](Json& s) { s["public_key"] = "AAAA"; }, "not the base64 of a 32-byte Ed25519"},
      {[](Json& s) { s["value"] = "not base64!"; }, "not the base64 of a 64-byte Ed25519"},
      {[](Json& s) { s.erase("value"); }, "missing required field 'value'"},
      {[](Json& s) { s = "signed"; }, "expected"},
  };
  for (const auto& c : cases) {
    Json j = good;
    c.edit(j["evaluation"]["environment"]["extra"]["signature"]);
    Diagnostics diag;
    EXPECT_FALSE(accepted(dump_json_line(j), diag));
    EXPECT_NE(diag.to_string().find(c.message), std::string::npos) << diag.to_string();
    EXPECT_NE(diag.to_string().find("$.evaluation.environment.extra.signature"), std::string::npos)
        << diag.to_string();
  }
}

// A forger's own key makes a valid signature by that key, never one by fib's: the signer is
// the forger's key id, which trust then decides about (fib/dataset/keys.h).
TEST(TraceSignature, AnotherKeysSignatureNamesThatKey) {
  const std::string line = signed_line(other_key());
  Diagnostics diag;
  const Trace t = parse_trace(line, diag);
  EXPECT_EQ(t.signer, other_key().public_key().key_id());
  EXPECT_NE(t.signer, kKeyId);
  // Claiming fib's key id beside the forger's public key does not verify.
  Json j = Json::parse(line);
  j["evaluation"]["environment"]["extra"]["signature"]["key_id"] = kKeyId;
  EXPECT_FALSE(accepted(dump_json_line(j), diag));
}

TEST(TraceSignature, ResigningReplacesTheSignature) {
  Diagnostics diag;
  Trace t = parse_trace(signed_line(other_key()), diag);
  sign_trace(t, test_key());
  EXPECT_EQ(parse_trace(dump_json_line(to_json(t)), diag).signer, kKeyId) << diag.to_string();
}

TEST(TraceSignature, PemRoundTripAndPublicKeyLines) {
  const SigningKey key = test_key();
  const SigningKey again = SigningKey::from_pem(key.to_pem(), "key.pem");
  EXPECT_EQ(again.public_key().key_id(), kKeyId);
  EXPECT_EQ(again.sign("x"), key.sign("x"));  // Ed25519 is deterministic
  EXPECT_THROW(SigningKey::from_pem("not a key", "key.pem"), Error);

  const std::string line = key.public_key().line("alice@host");
  EXPECT_EQ(line, std::string("ed25519 ") + std::string(kPublicKey) + " alice@host");
  auto parsed = PublicKey::parse_line(line);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->key_id(), kKeyId);
  EXPECT_FALSE(PublicKey::parse_line("ssh-rsa AAAA"));
  EXPECT_FALSE(PublicKey::parse_line("ed25519 A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbh="));
  EXPECT_FALSE(PublicKey::from_base64("A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMb"));
}

TEST(TraceSignature, WorkloadRecordsCannotBeSigned) {
  Trace w;
  w.definition = "gemm_n8";
  EXPECT_THROW(sign_trace(w, test_key()), Error);
}

}  // namespace
}  // namespace fib

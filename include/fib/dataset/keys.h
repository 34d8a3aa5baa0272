// Where fib keeps the key it signs traces with and the public keys whose traces it trusts
// (docs/traces.md). The signing key lives with the user, never in a dataset: a solution that
// can write to the dataset must not find the key there.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "fib/base/diagnostics.h"
#include "fib/trace/signature.h"

namespace fib {

// fib's configuration folder: $FIB_HOME, else $XDG_CONFIG_HOME/fib, else $HOME/.config/fib
// (the home folder from the password database when $HOME is unset).
std::filesystem::path fib_home();
// The signing key: $FIB_SIGNING_KEY, else <fib home>/signing-key.pem.
std::filesystem::path default_signing_key_path();
// The trusted keys: $FIB_TRUSTED_KEYS, else <fib home>/trusted-keys.
std::filesystem::path default_trusted_keys_path();

// Reads the Ed25519 key at `path` (PKCS#8 PEM); nullopt when there is no file. Throws
// fib::Error when it cannot be read, is no Ed25519 key, belongs to another user, or its mode
// lets anyone but its owner read it.
std::optional<SigningKey> load_signing_key(const std::filesystem::path& path);
// As load_signing_key, making a new key there (mode 0600; a folder it creates, 0700) when there
// is none. Two fibs doing so at once end up with the same key. `created` says which happened.
SigningKey load_or_create_signing_key(const std::filesystem::path& path, bool* created = nullptr);

// Key ids whose signatures count as verified.
struct TrustedKeys {
  std::set<std::string, std::less<>> key_ids;
  bool contains(std::string_view key_id) const { return key_ids.find(key_id) != key_ids.end(); }
};

// Adds the keys of a trusted-keys file: one "ed25519 <base64 public key> [comment]" a line,
// blank lines and lines starting with '#' skipped. A missing file adds nothing; a line that is
// not a key is an error finding (file:line) and is skipped.
void read_trusted_keys(const std::filesystem::path& path, TrustedKeys& into, Diagnostics& diag);
// Appends a key to a trusted-keys file (created when missing); false when it is there already.
bool add_trusted_key(const std::filesystem::path& path, const PublicKey& key,
                     std::string_view comment = {});

// What fib trusts by default: its own key (when the signing key exists; none is made here) and
// the keys of default_trusted_keys_path().
TrustedKeys default_trusted_keys(Diagnostics& diag);

}  // namespace fib

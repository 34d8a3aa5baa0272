// `fib key show|trust`: the key fib signs traces with, and the keys whose traces it trusts
// (docs/traces.md).
#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "fib/base/json.h"
#include "fib/dataset/keys.h"

namespace fib::cli {

namespace {

namespace fs = std::filesystem;

struct KeyFlags {
  std::string signing_key;
  std::string trusted_keys;
  std::string key;
  std::string comment;
  bool json = false;
  bool public_only = false;
};

fs::path or_default(const std::string& flag, fs::path fallback) {
  return flag.empty() ? fallback : fs::path(flag);
}

// "user@host", the comment a published public key line carries.
std::string owner_comment() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string user;
  if (const char* env = std::getenv("USER"); env != nullptr && *env != '\0') {
    user = env;
  } else if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr) {
    user = pw->pw_name;
  } else {
    user = std::to_string(::geteuid());
  }
  return fmt::format("{}@{}", user, host);
}

int show(const KeyFlags& f) {
  const fs::path key_path = or_default(f.signing_key, default_signing_key_path());
  const fs::path trusted_path = or_default(f.trusted_keys, default_trusted_keys_path());
  bool created = false;
  const SigningKey key = load_or_create_signing_key(key_path, &created);
  const PublicKey& pub = key.public_key();
  const std::string line = pub.line(owner_comment());
  if (f.public_only) {
    std::cout << line << "\n";
    return kExitOk;
  }
  Diagnostics diag;
  TrustedKeys trusted;
  read_trusted_keys(trusted_path, trusted, diag);
  if (f.json) {
    Json j;
    j["signing_key"] = key_path.string();
    j["created"] = created;
    j["key_id"] = pub.key_id();
    j["public_key"] = line;
    j["trusted_keys_file"] = trusted_path.string();
    j["trusted_key_ids"] = Json(trusted.key_ids);
    std::cout << dump_json_pretty(j);
  } else {
    std::cout << fmt::format(
        "signing key:  {}{}\nkey id:       {}\npublic key:   {}\ntrusted keys: {} ({} key(s); "
        "fib's own key is always trusted)\n\nOn another machine, trust the traces this key "
        "signs with:\n  fib key trust '{}'\n",
        key_path.string(), created ? " (made now, mode 0600)" : "", pub.key_id(), line,
        trusted_path.string(), trusted.key_ids.size(), line);
  }
  if (!diag.empty()) std::cerr << diag.to_string() << "\n";
  return diag.has_errors() ? kExitFindings : kExitOk;
}

int trust(const KeyFlags& f) {
  const fs::path trusted_path = or_default(f.trusted_keys, default_trusted_keys_path());
  auto pub = PublicKey::parse_line(f.key);
  if (!pub) pub = PublicKey::from_base64(f.key);
  if (!pub) {
    throw Error(f.key, "not an Ed25519 public key",
                "pass the line `fib key show` prints: 'ed25519 <base64> [comment]'");
  }
  std::string comment = f.comment;
  if (comment.empty()) {
    // Keep the comment of the line given ("ed25519 <base64> user@host").
    const auto after_key = f.key.find(pub->base64());
    if (after_key != std::string::npos) {
      comment = f.key.substr(after_key + pub->base64().size());
      comment.erase(0, comment.find_first_not_of(" \t"));
    }
  }
  const bool added = add_trusted_key(trusted_path, *pub, comment);
  std::cout << fmt::format("{} key {} in {}\n",
                           added ? "trusted" : "already trusted:", pub->key_id(),
                           trusted_path.string());
  return kExitOk;
}

}  // namespace

void register_key(CLI::App& app, Runner& run) {
  CLI::App* key = app.add_subcommand(
      "key", "The key fib signs traces with, and the keys whose traces count as verified");
  key->require_subcommand(1);

  auto s = std::make_shared<KeyFlags>();
  CLI::App* show_cmd = key->add_subcommand(
      "show", "Print the signing key's id and public key (making the key if there is none)");
  show_cmd->add_option("--signing-key", s->signing_key,
                       "key file (default: $FIB_SIGNING_KEY, else signing-key.pem in fib's "
                       "home: $FIB_HOME, $XDG_CONFIG_HOME/fib or ~/.config/fib)");
  show_cmd->add_option("--trusted-keys", s->trusted_keys,
                       "trusted keys file (default: $FIB_TRUSTED_KEYS, else trusted-keys in "
                       "fib's home)");
  show_cmd->add_flag("--public", s->public_only, "print only the public key line");
  show_cmd->add_flag("--json", s->json, "print as JSON");
  show_cmd->callback([&run, s] { run = [s] { return show(*s); }; });

  auto t = std::make_shared<KeyFlags>();
  CLI::App* trust_cmd =
      key->add_subcommand("trust", "Count traces signed by another key as verified");
  trust_cmd->add_option("public-key", t->key, "the line `fib key show` prints, or the base64 key")
      ->required();
  trust_cmd->add_option("--comment", t->comment, "what to note beside it (e.g. who owns it)");
  trust_cmd->add_option("--trusted-keys", t->trusted_keys,
                        "trusted keys file (default: $FIB_TRUSTED_KEYS, else trusted-keys in "
                        "fib's home)");
  trust_cmd->callback([&run, t] { run = [t] { return trust(*t); }; });
}

}  // namespace fib::cli

// The signing key and the trusted keys: made on first use with mode 0600 in a folder of mode
// 0700, read back as the same key, refused when others may read it; where they live by default.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "fib/dataset/keys.h"
#include "support/temp_dir.h"

namespace fib {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// Sets an environment variable for one scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(SigningKeyFile, MadeOnFirstUseWithMode0600AndReadBackTheSame) {
  TempDir dir;
  const fs::path key = dir.path() / "home" / "fib" / "signing-key.pem";
  EXPECT_FALSE(load_signing_key(key));
  bool created = false;
  const SigningKey first = load_or_create_signing_key(key, &created);
  EXPECT_TRUE(created);
  EXPECT_EQ(mode_of(key), 0600u);
  EXPECT_EQ(mode_of(key.parent_path()), 0700u);
  const SigningKey second = load_or_create_signing_key(key, &created);
  EXPECT_FALSE(created);
  EXPECT_EQ(second.public_key().key_id(), first.public_key().key_id());
  // No temporary file is left beside it.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(key.parent_path())) ++entries;
  EXPECT_EQ(entries, 1u);
}

TEST(SigningKeyFile, RefusedWhenOthersMayReadIt) {
  TempDir dir;
  const fs::path key = dir.path() / "signing-key.pem";
  load_or_create_signing_key(key);
  ::chmod(key.c_str(), 0644);
  try {
    load_signing_key(key);
    ADD_FAILURE() << "a key readable by others was used";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("readable or writable by others (mode 0644)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
  }
}

TEST(SigningKeyFile, NotAKeyIsAnError) {
  TempDir dir;
  const fs::path key = dir.write("signing-key.pem", "hello\n");
  ::chmod(key.c_str(), 0600);
  EXPECT_THROW(load_or_create_signing_key(key), Error);
}

TEST(SigningKeyFile, DefaultLocations) {
  const ScopedEnv key("FIB_SIGNING_KEY", std::nullopt);
  const ScopedEnv trusted("FIB_TRUSTED_KEYS", std::nullopt);
  {
    const ScopedEnv home("FIB_HOME", "/x/fib-home");
    EXPECT_EQ(fib_home(), fs::path("/x/fib-home"));
    EXPECT_EQ(default_signing_key_path(), fs::path("/x/fib-home/signing-key.pem"));
    EXPECT_EQ(default_trusted_keys_path(), fs::path("/x/fib-home/trusted-keys"));
  }
  const ScopedEnv home("FIB_HOME", std::nullopt);
  {
    const ScopedEnv xdg("XDG_CONFIG_HOME", "/x/config");
    EXPECT_EQ(fib_home(), fs::path("/x/config/fib"));
  }
  const ScopedEnv xdg("XDG_CONFIG_HOME", std::nullopt);
  {
    const ScopedEnv user_home("HOME", "/x/user");
    EXPECT_EQ(fib_home(), fs::path("/x/user/.config/fib"));
    const ScopedEnv chosen("FIB_SIGNING_KEY", "/keys/mine.pem");
    EXPECT_EQ(default_signing_key_path(), fs::path("/keys/mine.pem"));
  }
}

TEST(TrustedKeysFile, ReadsKeyLinesAndReportsOthers) {
  TempDir dir;
  const SigningKey a = SigningKey::generate();
  const SigningKey b = SigningKey::generate();
  const fs::path file =
      dir.write("trusted-keys", "# colleagues\n\n" + a.public_key().line("alice@host") +
                                    "\nnot a key\n  " + b.public_key().line() + "\n");
  TrustedKeys keys;
  Diagnostics diag;
  read_trusted_keys(file, keys, diag);
  EXPECT_EQ(keys.key_ids.size(), 2u);
  EXPECT_TRUE(keys.contains(a.public_key().key_id()));
  EXPECT_TRUE(keys.contains(b.public_key().key_id()));
  ASSERT_EQ(diag.size(), 1u);
  EXPECT_EQ(diag.items()[0].file, file.string() + ":4");

  TrustedKeys none;
  read_trusted_keys(dir.path() / "missing", none, diag);
  EXPECT_TRUE(none.key_ids.empty());
  EXPECT_EQ(diag.size(), 1u);
}

TEST(TrustedKeysFile, AddingAKeyOnce) {
  TempDir dir;
  const fs::path file = dir.path() / "cfg" / "trusted-keys";
  const SigningKey a = SigningKey::generate();
  EXPECT_TRUE(add_trusted_key(file, a.public_key(), "alice@host"));
  EXPECT_FALSE(add_trusted_key(file, a.public_key()));
  EXPECT_EQ(TempDir::read_file(file), a.public_key().line("alice@host") + "\n");
}

// The own key counts as trusted once it exists; reading trust never makes a key.
TEST(TrustedKeysFile, DefaultTrustIsTheOwnKeyAndTheFile) {
  TempDir dir;
  const ScopedEnv home("FIB_HOME", dir.path().string());
  const ScopedEnv key("FIB_SIGNING_KEY", std::nullopt);
  const ScopedEnv trusted("FIB_TRUSTED_KEYS", std::nullopt);
  Diagnostics diag;
  EXPECT_TRUE(default_trusted_keys(diag).key_ids.empty());
  EXPECT_FALSE(fs::exists(dir.path() / "signing-key.pem"));
  const SigningKey own = load_or_create_signing_key(default_signing_key_path());
  const SigningKey colleague = SigningKey::generate();
  add_trusted_key(default_trusted_keys_path(), colleague.public_key());
  const TrustedKeys keys = default_trusted_keys(diag);
  EXPECT_TRUE(keys.contains(own.public_key().key_id()));
  EXPECT_TRUE(keys.contains(colleague.public_key().key_id()));
  EXPECT_TRUE(diag.empty()) << diag.to_string();
}

}  // namespace
}  // namespace fib

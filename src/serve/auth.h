// fib serve's bearer token: where it comes from (a --token-file, else one fib makes in the state
// folder) and how a request proves it has it (an Authorization header or the cookie /login sets).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fib/serve/tokens.h"

namespace httplib {
struct Request;
}

namespace fib::serve {

inline constexpr const char* kTokenCookie = "fib_token";

// 32 random bytes, hex.
std::string make_token();
// The first line of a token file, trimmed. Throws fib::Error when it is missing, empty or
// readable by others than its owner (a token anyone on the host can read protects nothing).
std::string read_token_file(const std::filesystem::path& path);
// The state folder's token file, made (mode 0600, atomically) when absent; `created` says which.
std::string load_or_create_token(const std::filesystem::path& path, bool* created);

// The token a request carries, as "Authorization: Bearer <token>" or as the fib_token cookie;
// empty when none.
std::string_view presented_token(const httplib::Request& req);

// Whether `given` is the token, compared in constant time.
bool token_matches(std::string_view given, const std::string& token);

// The Set-Cookie value that logs a browser in.
std::string login_cookie(const std::string& token);

// Who a request is: the admin (the server's token; everyone with --no-auth), the author of a
// token in the token store, or nobody.
class Authenticator {
 public:
  // An empty admin token: no authentication (--no-auth).
  Authenticator(std::string admin_token, std::unique_ptr<TokenStore> store)
      : admin_token_(std::move(admin_token)), store_(std::move(store)) {}

  std::optional<Identity> identify(const httplib::Request& req) const;
  std::optional<Identity> identify_token(std::string_view token) const;
  const std::string& admin_token() const { return admin_token_; }

 private:
  std::string admin_token_;
  std::unique_ptr<TokenStore> store_;
};

}  // namespace fib::serve

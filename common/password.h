// Password hashing for the developer center (docs/contract.md §9): scrypt through
// OpenSSL 3's EVP_KDF, a memory-hard function, so a stolen database costs an
// attacker memory as well as time per guess.
//
// Why scrypt and not Argon2id: OpenSSL 3 (already linked for SHA-256 and
// HMAC) has it, so no new library; Argon2id would need libsodium for the
// same property. Parameters: N = 2^15, r = 8, p = 1 (32 MiB, ~50-100 ms on
// the reference machine), the values RFC 7914 and OWASP give for
// interactive logins. They are stored with every hash, so raising them later
// keeps old hashes verifiable.
//
// Format: scrypt$<log2 N>$<r>$<p>$<salt, base64>$<hash, base64> (16-byte
// salt, 32-byte hash). Stateless and thread-safe; slow by design, so eq-api
// runs it on libuv's thread pool, never on its loop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace eq::password {

constexpr std::size_t kMinLength = 10;  // characters (UTF-8 code points)

// A new hash of `password` with a fresh salt; empty if OpenSSL fails.
std::string hash(std::string_view password);
// Whether `password` matches `stored` (constant-time comparison of the
// derived key). A malformed `stored` never matches.
bool verify(std::string_view password, const std::string& stored);
// Spends the work a verify() of a current hash costs, without a stored
// hash, so an unknown email answers in the same time as a wrong password: it
// is verify() itself, against decoyHash().
void burnVerifyTime(std::string_view password);

// The scrypt parameters verify() derives with for `stored`; nullopt when
// verify() refuses `stored` without deriving anything (malformed, or
// parameters out of bounds). What a check costs is a function of these.
struct Params {
  int log_n = 0;
  uint32_t r = 0;
  uint32_t p = 0;
  bool operator==(const Params&) const = default;
};
std::optional<Params> paramsOf(std::string_view stored);

// A well-formed hash with the parameters hash() uses now, whose derived key
// is all zeros: no password matches it (but with odds of 2^-256), and
// verifying against it costs what verifying a real one does.
std::string decoyHash();
// Whether a password is long enough: kMinLength code points.
bool acceptable(std::string_view password);

}  // namespace eq::password

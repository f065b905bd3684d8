#include "common/password.h"

#include <openssl/core_names.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <cstdint>
#include <vector>

#include "common/crypto.h"

namespace eq::password {
namespace {

constexpr int kLogN = 15;
constexpr uint32_t kR = 8;
constexpr uint32_t kP = 1;
constexpr std::size_t kSaltBytes = 16;
constexpr std::size_t kHashBytes = 32;
// The largest parameters verify() accepts from a stored hash: bounds the
// memory a tampered row could make us allocate.
constexpr int kMaxLogN = 20;
constexpr uint32_t kMaxR = 16;
constexpr uint32_t kMaxP = 4;

bool derive(std::string_view password, std::string_view salt, int log_n, uint32_t r, uint32_t p,
            std::string* out) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "SCRYPT", nullptr);
  if (kdf == nullptr) return false;
  EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (ctx == nullptr) return false;
  uint64_t n = uint64_t{1} << log_n;
  // 128 * N * r bytes for the work area, and some room.
  uint64_t maxmem = 128 * n * r * 2 + (1u << 20);
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_PASSWORD,
                                        const_cast<char*>(password.data()), password.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<char*>(salt.data()),
                                        salt.size()),
      OSSL_PARAM_construct_uint64(OSSL_KDF_PARAM_SCRYPT_N, &n),
      OSSL_PARAM_construct_uint32(OSSL_KDF_PARAM_SCRYPT_R, &r),
      OSSL_PARAM_construct_uint32(OSSL_KDF_PARAM_SCRYPT_P, &p),
      OSSL_PARAM_construct_uint64(OSSL_KDF_PARAM_SCRYPT_MAXMEM, &maxmem),
      OSSL_PARAM_construct_end()};
  out->assign(kHashBytes, '\0');
  bool ok = EVP_KDF_derive(ctx, reinterpret_cast<unsigned char*>(out->data()), out->size(),
                           params) == 1;
  EVP_KDF_CTX_free(ctx);
  return ok;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    std::size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return parts;
    start = pos + 1;
  }
}

bool parseUint(std::string_view s, uint32_t max, uint32_t* out) {
  if (s.empty() || s.size() > 3) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v == 0 || v > max) return false;
  *out = v;
  return true;
}

// A stored hash taken apart; false when verify() must refuse it unchecked.
struct Parsed {
  Params params;
  std::string salt;
  std::string expected;
};

bool parse(std::string_view stored, Parsed* out) {
  std::vector<std::string_view> parts = split(stored, '$');
  if (parts.size() != 6 || parts[0] != "scrypt") return false;
  uint32_t log_n = 0;
  if (!parseUint(parts[1], kMaxLogN, &log_n) || !parseUint(parts[2], kMaxR, &out->params.r) ||
      !parseUint(parts[3], kMaxP, &out->params.p)) {
    return false;
  }
  out->params.log_n = static_cast<int>(log_n);
  return crypto::base64Decode(parts[4], &out->salt) &&
         crypto::base64Decode(parts[5], &out->expected) && out->expected.size() == kHashBytes;
}

}  // namespace

std::string hash(std::string_view password) {
  std::string salt = crypto::randomBytes(kSaltBytes);
  std::string key;
  if (!derive(password, salt, kLogN, kR, kP, &key)) return "";
  return "scrypt$" + std::to_string(kLogN) + "$" + std::to_string(kR) + "$" + std::to_string(kP) +
         "$" + crypto::base64(salt) + "$" + crypto::base64(key);
}

bool verify(std::string_view password, const std::string& stored) {
  Parsed h;
  if (!parse(stored, &h)) return false;
  std::string key;
  if (!derive(password, h.salt, h.params.log_n, h.params.r, h.params.p, &key)) return false;
  return crypto::constantTimeEqual(key, h.expected);
}

std::optional<Params> paramsOf(std::string_view stored) {
  Parsed h;
  if (!parse(stored, &h)) return std::nullopt;
  return h.params;
}

std::string decoyHash() {
  return "scrypt$" + std::to_string(kLogN) + "$" + std::to_string(kR) + "$" + std::to_string(kP) +
         "$" + crypto::base64(std::string(kSaltBytes, '\0')) + "$" +
         crypto::base64(std::string(kHashBytes, '\0'));
}

void burnVerifyTime(std::string_view password) {
  // The same function as a real check, on a hash of the same parameters:
  // the work cannot drift from verify()'s when either changes. The answer
  // is thrown away (nothing matches the decoy).
  (void)verify(password, decoyHash());
}

bool acceptable(std::string_view password) {
  std::size_t code_points = 0;
  for (unsigned char c : password) {
    if ((c & 0xC0) != 0x80) ++code_points;
  }
  return code_points >= kMinLength;
}

}  // namespace eq::password

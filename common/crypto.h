// Cryptographic and encoding primitives over OpenSSL: SHA-256, HMAC-SHA256,
// secure random bytes, hex and base64 codecs, constant-time comparison.
// Stateless and thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace eq::crypto {

std::string sha256(std::string_view data);                            // 32 raw bytes
std::string hmacSha256(std::string_view key, std::string_view data);  // 32 raw bytes
std::string randomBytes(std::size_t n);  // aborts if the system RNG fails

std::string hex(std::string_view bytes);
std::string base64(std::string_view bytes);     // standard alphabet, padded
std::string base64url(std::string_view bytes);  // URL alphabet, unpadded
// Decodes standard base64; returns false on malformed input.
bool base64Decode(std::string_view text, std::string* out);

// Compares two equal-length byte strings in time independent of where they
// differ; different lengths compare unequal (lengths are not secret here:
// callers compare fixed-size digests).
bool constantTimeEqual(std::string_view a, std::string_view b);

}  // namespace eq::crypto

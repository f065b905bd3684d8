#include "common/ids.h"

#include "common/crypto.h"
#include "common/timefmt.h"

namespace eq::ids {
namespace {

constexpr char kCrockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

}  // namespace

std::string timeOrdered(std::string_view prefix, int64_t unix_ms) {
  // 128 bits: 48-bit timestamp big-endian, then 80 random bits; 26 base32
  // digits cover 130 bits, the top two always zero.
  unsigned char bytes[16];
  uint64_t ts = static_cast<uint64_t>(unix_ms);
  for (int i = 0; i < 6; ++i) bytes[i] = static_cast<unsigned char>(ts >> (8 * (5 - i)));
  std::string rnd = crypto::randomBytes(10);
  for (int i = 0; i < 10; ++i) bytes[6 + i] = static_cast<unsigned char>(rnd[i]);

  std::string out(prefix);
  out.reserve(prefix.size() + 26);
  // Read the 128 bits five at a time from the top, after two leading zero bits.
  for (int d = 0; d < 26; ++d) {
    int bit = d * 5 - 2;  // position of this digit's first bit in the 128-bit string
    int v = 0;
    for (int b = 0; b < 5; ++b) {
      int pos = bit + b;
      int set = (pos >= 0) ? (bytes[pos / 8] >> (7 - pos % 8)) & 1 : 0;
      v = (v << 1) | set;
    }
    out += kCrockford[v];
  }
  return out;
}

std::string newTaskId() { return timeOrdered("tsk_", nowMs()); }
std::string newRequestId() { return timeOrdered("req_", nowMs()); }
std::string newKeyId() { return timeOrdered("key_", nowMs()); }
std::string newInstanceId() { return timeOrdered("api_", nowMs()); }
std::string newAccountId() { return timeOrdered("acc_", nowMs()); }
std::string newDeliveryId() { return timeOrdered("dlv_", nowMs()); }

bool looksLike(std::string_view s, std::string_view prefix) {
  if (s.size() != prefix.size() + 26 || s.substr(0, prefix.size()) != prefix) return false;
  for (char c : s.substr(prefix.size())) {
    bool ok = false;
    for (const char* p = kCrockford; *p != '\0'; ++p) ok = ok || (*p == c);
    if (!ok) return false;
  }
  return true;
}

}  // namespace eq::ids

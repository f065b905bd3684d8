// Identifiers. Task ids are time-ordered (tsk_ + 26 Crockford base32 chars:
// 48 bits of milliseconds, then 80 random bits, the ULID layout), so they sort
// by creation time in SQLite indexes and in logs. Request ids use the same
// layout with the req_ prefix. Thread-safe: randomness comes from OpenSSL.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace eq::ids {

std::string timeOrdered(std::string_view prefix, int64_t unix_ms);
std::string newTaskId();     // tsk_...
std::string newRequestId();  // req_...
std::string newKeyId();      // key_...
std::string newAccountId();  // acc_...
std::string newDeliveryId(); // dlv_...
std::string newInstanceId(); // api_... (one eq-api process's run)

// True if s looks like an id we issued with this prefix (used to reject junk
// path parameters before touching the database).
bool looksLike(std::string_view s, std::string_view prefix);

}  // namespace eq::ids

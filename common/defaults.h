// Every tunable default in one place. Configuration (common/config.h) starts
// from these and lets the environment override them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace eq::defaults {

constexpr int kHttpPort = 8080;
constexpr const char* kAmqpUrl = "amqp://eq:eq@127.0.0.1:5672/";
constexpr const char* kDbPath = "var/eq.db";

// Requests (PRODUCT.md §3).
constexpr std::size_t kMaxBodyBytes = 64 * 1024;
constexpr std::size_t kMaxMessageCodePoints = 2000;
constexpr std::size_t kMaxContextCodePoints = 4000;
constexpr std::size_t kMaxWebhookUrlChars = 2048;
constexpr int kMinReplyCount = 1;
constexpr int kMaxReplyCount = 5;
constexpr int kMaxJsonDepth = 32;

// Keys and quota (PRODUCT.md §4).
constexpr int kDefaultRatePerMinute = 60;
constexpr int kDefaultQuotaUnits = 100;
constexpr int64_t kDefaultQuotaDays = 30;

// How long a sync call waits for its worker before answering 504. The
// interface says perfect mode "typically" takes 30-90 s with a model, so its
// deadline is the longest; the built-in engine answers in milliseconds.
constexpr int64_t kSyncDeadlineFastMs = 30'000;
constexpr int64_t kSyncDeadlineStandardMs = 120'000;
constexpr int64_t kSyncDeadlinePerfectMs = 180'000;
constexpr int64_t kAnalyzeDeadlineMs = 30'000;

// Webhooks (PRODUCT.md §6).
constexpr long kWebhookTimeoutMs = 10'000;

// SQLite: how long eq-api waits for another process's write lock before
// answering 503 (PRODUCT.md §2: 503 "within a second", never a hang).
constexpr int kApiDbBusyTimeoutMs = 500;

// Broker.
constexpr int kAmqpHeartbeatSeconds = 30;
// Handshake and synchronous AMQP methods (declare, consume, qos) against a
// broker that accepted the TCP connection but does not answer.
constexpr int kAmqpRpcTimeoutMs = 10'000;
// Reconnect backoff of every process: 100 ms doubling, capped at 1 s. The cap
// bounds how long a process stays away after the broker is back (eq-api,
// the workers and the dispatcher all must reconnect before a sync call can
// succeed again; we promise recovery within 5 s). One attempt a second is a
// refused TCP connect against a stopped broker: no load worth saving.
constexpr int kReconnectBackoffInitialMs = 100;
constexpr int kReconnectBackoffMaxMs = 1000;

}  // namespace eq::defaults

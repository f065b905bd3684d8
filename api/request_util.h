// Small pieces the parts of ApiService share (api/router.cc, auth.cc,
// admission.cc, resources.cc): header checks, JSON writing, deadlines. Pure
// functions, any thread.
#pragma once

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <strings.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/config.h"
#include "common/defaults.h"
#include "common/enums.h"
#include "common/json.h"
#include "common/timefmt.h"
#include "store/store.h"

namespace eq::api::util {

using json::putString;
using json::Writer;

constexpr std::string_view kTaskPrefix = "/api/v1/task/";

// "application/json", optionally with parameters such as charset=utf-8.
inline bool isJsonContentType(const std::string* ct) {
  if (ct == nullptr) return false;
  std::string_view v = *ct;
  std::string_view media = v.substr(0, v.find(';'));
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  return media.size() == 16 && strncasecmp(media.data(), "application/json", 16) == 0;
}

inline void putTime(Writer& w, const char* key, int64_t ms) {
  w.Key(key);
  if (ms == 0) {
    w.Null();
  } else {
    std::string t = iso8601(ms);
    w.String(t.c_str(), static_cast<rapidjson::SizeType>(t.size()));
  }
}

// The calendar month (UTC) of now_ms and the text of when it ends, worked
// out again only when the month turns: GET /api/v1/quota is answered tens
// of thousands of times a second, and the calendar arithmetic and the
// formatting cost more than the rest of its answer (a loop thread's own
// copy: no lock).
struct MonthOfNow {
  int64_t start_ms = 0;
  int64_t next_ms = 0;
  std::string next_text;  // next_ms in expire_at's form
};
inline const MonthOfNow& monthOf(int64_t now_ms) {
  thread_local MonthOfNow month;
  if (now_ms < month.start_ms || now_ms >= month.next_ms) {
    month.start_ms = monthStartMs(now_ms);
    month.next_ms = nextMonthStartMs(now_ms);
    month.next_text = iso8601Offset(month.next_ms);
  }
  return month;
}

// "monthly": the account's monthly volume at now_ms (docs/contract.md §11),
// as GET /api/v1/quota and the developer center show it: the limit (null
// for none), the units used this calendar month (UTC) and when it resets.
inline void putMonthly(Writer& w, const AccountQuota& q, int64_t now_ms) {
  const MonthOfNow& month = monthOf(now_ms);
  json::putMonthly(w, q.monthly_limit, q.usedInMonthStarting(month.start_ms), month.next_text);
}

// The quota record (the interface's §2.5) as GET /api/v1/quota and the
// developer center's overview write it, the object's members in an open
// object: the remaining units per mode, expire_at, tier and monthly.
inline void putQuota(Writer& w, const AccountQuota& q, int64_t now_ms) {
  w.Key("quota");
  w.StartObject();
  w.Key("standard");
  w.Int64(q.remaining.standard);
  w.Key("fast");
  w.Int64(q.remaining.fast);
  w.Key("perfect");
  w.Int64(q.remaining.perfect);
  w.EndObject();
  putString(w, "expire_at", iso8601Offset(q.expire_at_ms));
  putString(w, "tier", q.tier);
  putMonthly(w, q, now_ms);
}

// An async call's open charge is settled by eq-api once the broker has
// confirmed the job (or failed the task): well within this window. A charge
// still open after it, plus the sweeper's grace, is settled by the sweeper
// even if this process lives (Store::settleOrphanedCharges).
inline constexpr int64_t kAsyncSettleWindowMs = 60'000;
// How long a sync call's after-the-answer close of its open charge may
// wait for the database (a lock held elsewhere) before it is left to the
// sweeper, which then refunds the call: generous, since nobody waits on it.
inline constexpr int64_t kCloseChargeWaitMs = 10'000;

inline int64_t syncDeadlineMs(const Config& cfg, const std::string& mode) {
  if (cfg.sync_deadline_ms > 0) return cfg.sync_deadline_ms;
  std::optional<Mode> m = parseMode(mode);
  if (!m) return defaults::kAnalyzeDeadlineMs;  // analyze calls have no mode
  switch (*m) {
    case Mode::kFast: return defaults::kSyncDeadlineFastMs;
    case Mode::kStandard: return defaults::kSyncDeadlineStandardMs;
    case Mode::kPerfect: return defaults::kSyncDeadlinePerfectMs;
  }
  return defaults::kAnalyzeDeadlineMs;
}

}  // namespace eq::api::util

// Authentication and rate limit: a well-formed bearer key, then one
// database step (key lookup unless the cache vouches, the rate count, and the
// route's own work); 401, 429 and 503 are answered here.
#include "api/handlers.h"

#include "api/request_util.h"
#include "common/crypto.h"
#include "common/log.h"

namespace eq::api {
namespace {

// Extracts the key from "Bearer <key>"; empty when the header is malformed.
std::string bearerToken(const std::string* header) {
  if (header == nullptr || header->size() < 7 || strncasecmp(header->c_str(), "Bearer ", 7) != 0) {
    return "";
  }
  // Optional whitespace around the token is a space or a tab (RFC 9110 OWS),
  // trimmed alike.
  std::string_view token = std::string_view(*header).substr(7);
  while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return std::string(token);
}

// eq_live_/eq_test_ + 43 base64url characters. Anything else is refused
// before it reaches the database.
bool wellFormedKey(const std::string& key, const std::string& prefix) {
  if (key.size() != prefix.size() + 43 || key.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < key.size(); ++i) {
    char c = key[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

using util::isJsonContentType;
using util::kTaskPrefix;
using util::putString;
using util::putTime;
using util::syncDeadlineMs;
using util::Writer;

// ---------------------------------------------------------------- authentication

void ApiService::authorize(const CallPtr& c, DbWork work, bool writes, Then then) {
  if (c->portal) {
    portalAuthorize(c, std::move(work), std::move(then));
    return;
  }
  auto r = std::make_unique<DbRequest>();
  r->writes = writes;
  r->work = std::move(work);
  keyStep(c, std::move(r),
          [then = std::move(then)](const CallPtr& call, DbRequest&) { then(call); });
}

void ApiService::authorizeCharge(const CallPtr& c, Store::ChargeCall charge, ChargeThen then) {
  auto r = std::make_unique<DbRequest>();
  r->charge = std::move(charge);
  keyStep(c, std::move(r), [this, then = std::move(then)](const CallPtr& call, DbRequest& done) {
    // Made for every admitted request of a committed batch, as the quota
    // read is; a batch that failed answered 503 before this.
    if (!done.charged) {
      unavailable(call->info, call->res, "the call could not be charged");
      return;
    }
    then(call, *done.charged);
  });
}

void ApiService::authorizeQuotaRead(const CallPtr& c, QuotaThen then) {
  auto r = std::make_unique<DbRequest>();
  r->writes = false;
  r->reads_quota = true;
  keyStep(c, std::move(r), [this, then = std::move(then)](const CallPtr& call, DbRequest& done) {
    // Read for every admitted request of a committed batch; a batch that
    // failed answered 503 before this.
    if (!done.quota) {
      unavailable(call->info, call->res, "the quota could not be read");
      return;
    }
    then(call, *done.quota);
  });
}

void ApiService::keyStep(const CallPtr& c, std::unique_ptr<DbRequest> r, StepThen then) {
  // 401 for anything but a well-formed key, before any database step: a
  // malformed key never waits for the database.
  // Two Authorization headers are refused even when one of them is good:
  // intermediaries disagree on which one counts (first, last, joined).
  std::string key = c->req.headerCount("authorization") == 1
                        ? bearerToken(c->req.header("authorization"))
                        : std::string();
  if (!wellFormedKey(key, ctx_.config->keyPrefix())) {
    unauthorized(c->info, c->res);
    return;
  }
  r->now_ms = ctx_.clock->nowMs();
  r->deadline_ms = dbDeadline();
  r->key_digest = crypto::sha256(key);
  r->env = ctx_.config->env;
  if (const AuthCache::Entry* e = auth_cache_.find(r->key_digest, r->now_ms)) {
    r->auth = e->auth;
    r->auth_epoch = e->epoch;
  }
  r->count_rate = true;  // every authenticated request counts
  r->done = [this, c, then = std::move(then)](DbRequest& done) {
    const Info& info = c->info;
    auth_cache_.sawEpoch(done.key_epoch);
    if (done.looked_up) {
      if (done.authenticated) {
        auth_cache_.put(done.key_digest, *done.auth, done.key_epoch, done.now_ms);
      } else {
        auth_cache_.forget(done.key_digest);
      }
    }
    if (!done.status.isOk()) {
      // A full disk fails every request until space is freed; the database
      // thread logs that once, and each request's 503 has its access line.
      if (!done.storage_failed) {
        log::error("database step failed", {{"request_id", info->request_id},
                                            {"error", done.status.msg()}});
      }
      databaseUnavailable(info, c->res, done);
      return;
    }
    if (!done.authenticated) {
      unauthorized(info, c->res);
      return;
    }
    c->auth = done.auth;
    info->key_prefix = done.auth->display_prefix;
    const RateDecision& d = done.rate;
    info->extra_headers = {{"X-RateLimit-Limit", std::to_string(d.limit)},
                           {"X-RateLimit-Remaining", std::to_string(d.remaining)},
                           {"X-RateLimit-Reset", std::to_string(d.reset_seconds)}};
    if (!d.allowed) {
      rate_limited_.inc();
      info->extra_headers.emplace_back("Retry-After", std::to_string(d.reset_seconds));
      sendError(info, c->res, 429,
                "rate limit exceeded: " + std::to_string(d.limit) +
                    " requests per minute for this key; retry after " +
                    std::to_string(d.reset_seconds) + " s");
      return;
    }
    then(c, done);
  };
  ctx_.db->submit(std::move(r));
}

}  // namespace eq::api

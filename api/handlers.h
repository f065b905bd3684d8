// ApiService: the route table and the endpoint handlers of eq-api.
//
// Lives on the api's loop thread together with the HttpServer that calls it.
// It never touches SQLite: every database step of a request (key lookup, rate
// count, idempotency, charge, task insert, reads, refunds) is a DbRequest run
// by the DbThread (api/db_thread.h), which answers on this loop thread once
// the batch holding it committed. It borrows the DbThread, the BrokerBridge
// and the Config from ApiContext, which main() owns and which outlives the
// service. Handlers answer through the Responder, possibly later, and every
// answer goes through finish(), which runs the request's last writes
// (Idempotency-Key record, refund), adds the common headers, counts the
// request for /metrics and writes the access log line.
//
// One class, one part per file:
//   api/router.cc     the route table (kRoutes) and dispatch, the public
//                     routes (/healthz, /readyz, /metrics, /openapi.yaml)
//   api/auth.cc       authentication and rate limit (authorize)
//   api/admission.cc  the reply endpoints: Idempotency-Key, charge, task row,
//                     the broker call, and finish(), which settles them
//   api/resources.cc  analysis, quota and task handlers
//   api/handlers.cc   answers: envelopes, errors, send() with metrics and log
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/auth_cache.h"
#include "api/broker_bridge.h"
#include "api/db_thread.h"
#include "common/config.h"
#include "common/http_server.h"
#include "common/metrics.h"
#include "common/netaddr.h"
#include "common/timefmt.h"
#include "store/store.h"

namespace eq::api {

using http::HttpLimits;
using http::HttpRequest;
using http::HttpResponse;
using http::HttpServer;
using http::Responder;

struct ApiContext {
  const Config* config = nullptr;
  DbThread* db = nullptr;
  BrokerBridge* broker = nullptr;
  const Clock* clock = nullptr;
  const net::CidrSet* webhook_allow = nullptr;  // EQ_WEBHOOK_ALLOW_CIDRS
  std::string instance_id;  // this process's api_instances row (crash-safe accounting)
  uv_loop_t* loop = nullptr;  // the loop thread's; the portal's password hashing uses its pool
  // EQ_TRUSTED_PROXIES: whose X-Forwarded-For / Forwarded name the client
  // (api/client_address.h); null or empty: the TCP peer is the client.
  const net::CidrSet* trusted_proxies = nullptr;
};

// What a handler needs to remember about its request after the HttpRequest
// itself is gone (async completions).
struct RequestInfo {
  std::string request_id;
  std::string method;
  std::string route;
  std::string key_prefix;
  std::string client;  // the client address (api/client_address.h), as text, for the access log
  int64_t started_ms = 0;
  // A developer-center answer while cookies are Secure: finish() adds
  // Strict-Transport-Security.
  bool hsts = false;
  // A playground call holding one of its session's in-flight slots (the
  // SHA-256 of the session id): send() gives it back.
  std::string playground_slot;
  std::vector<std::pair<std::string, std::string>> extra_headers;  // rate-limit headers
  // Set while this request owns a pending Idempotency-Key row: finish()
  // stores a final response in it or deletes it (docs/contract.md §3).
  std::optional<IdempotencyRequest> idempotency;
  std::string mode;  // reply calls, once validated: the mode label of /metrics
  // Writes finish() runs before answering: a unit to refund (sync calls that
  // got no result) and a task to fail (async jobs the broker did not take).
  std::string account_id;
  std::string refund_mode;
  int64_t charged_at_ms = 0;  // when the unit to refund was charged (its month)
  std::string failed_task_id;
  std::string failed_task_msg;
  // The open charge admission wrote (its request id): finish() closes it
  // in the same step that keeps or refunds the unit, and refunds only if it
  // was still open (a sweeper may have settled it; see Store::closeCharge).
  std::string open_charge;
  bool close_charge_after_answer = false;  // a sync 200: close it without waiting
  int64_t tokens_used = 0;  // a sync 200's tokens_used, for the usage record
};

struct ReplyAdmission;  // handlers.cc: what the reply endpoints' database step decided

// A request on its way through the route's steps.
struct Call {
  HttpRequest req;
  Responder res;
  std::shared_ptr<RequestInfo> info;
  std::optional<AuthContext> auth;  // once authenticated
  // The developer center's playground: authenticated by the session cookie,
  // not a key (authorize() hands over to portalAuthorize()).
  bool portal = false;
};

// GET /api/v1/task's data for a task (and its delivery, if any).
std::string taskJson(const TaskRecord& task, const DeliveryRecord* delivery);

class ApiService {
 public:
  explicit ApiService(ApiContext ctx) : ctx_(ctx) {
    start_time_.set(static_cast<double>(ctx_.clock->nowMs()) / 1000.0);
  }

  void handle(HttpRequest&& req, Responder res);

  // Closes, in one database step, the open charges of the sync calls
  // answered since the last time. main() calls it once per loop iteration
  // and before the database thread stops.
  void closeAnsweredCharges();

  // Requests answered so far by (route, status), refusals by rate limit and
  // quota, and latencies; rendered by /metrics. Counts are per process.
  std::string renderMetrics();
  int64_t inFlight() const { return static_cast<int64_t>(in_flight_.value()); }

 private:
  using Info = std::shared_ptr<RequestInfo>;
  using CallPtr = std::shared_ptr<Call>;
  using DbWork = std::function<Status(Store& store, const AuthContext* auth)>;
  using Then = std::function<void(const CallPtr& call)>;

 public:
  // One row per route: the dispatch is this table, nothing else.
  struct Route {
    std::string_view path;    // the label of logs and metrics
    std::string_view method;  // the one allowed method
    bool prefix;              // path ends in a parameter ("/api/v1/task/{task_id}")
    void (ApiService::*handler)(const CallPtr& call);
  };

 private:
  static const std::array<Route, 40> kRoutes;
  static const Route* matchRoute(std::string_view path);

  // Public routes.
  void healthz(const CallPtr& c);
  void readyz(const CallPtr& c);
  void metrics(const CallPtr& c);
  void openapi(const CallPtr& c);
  // Authenticated routes: each calls authorize() with its database work.
  void replySync(const CallPtr& c);
  void replyAsync(const CallPtr& c);
  void analyze(const CallPtr& c);
  void quota(const CallPtr& c);
  void task(const CallPtr& c);

  // The developer center (api/portal.cc, api/portal_pages.cc).
  using SessionWork = std::function<Status(Store& store, const PortalSession& session,
                                           Status& answer, std::string& data_json)>;
  using SessionThen = std::function<void(const CallPtr& call, const PortalSession& session,
                                         const Status& answer, const std::string& data_json)>;
  using PersonThen = std::function<void(const CallPtr& call, const Person& person)>;
  void portalRedirect(const CallPtr& c);
  void portalAsset(const CallPtr& c);
  void portalConfig(const CallPtr& c);
  void portalLink(const CallPtr& c);
  void portalUseLink(const CallPtr& c);
  void portalRegister(const CallPtr& c);
  void portalSignin(const CallPtr& c);
  void portalSignout(const CallPtr& c);
  void portalMe(const CallPtr& c);
  void portalSession(const CallPtr& c);
  void portalPassword(const CallPtr& c);
  void portalKeys(const CallPtr& c);
  void portalKeyCreate(const CallPtr& c);
  void portalKeyRotate(const CallPtr& c);
  void portalKeyRevoke(const CallPtr& c);
  void portalKeyChange(const CallPtr& c, bool rotate);
  void portalUsage(const CallPtr& c);
  void portalPlaygroundReply(const CallPtr& c);
  void portalPlaygroundAnalyze(const CallPtr& c);
  // At most kPlaygroundInFlightPerSession playground calls of one session in
  // flight (this process): takes a slot, or answers 429 and returns false.
  bool takePlaygroundSlot(const CallPtr& c);
  void releasePlaygroundSlot(const std::string& slot);
  std::map<std::string, int> playground_in_flight_;  // loop thread: by session id hash
  void portalWebhooks(const CallPtr& c);
  void portalWebhookUrl(const CallPtr& c);
  void portalWebhookReveal(const CallPtr& c);
  void portalWebhookRotate(const CallPtr& c);
  void portalWebhookSecret(const CallPtr& c, bool rotate);
  void portalWebhookTest(const CallPtr& c);
  void portalDelivery(const CallPtr& c);
  void portalDeliveryReplay(const CallPtr& c);
  void portalTasks(const CallPtr& c);
  void portalTask(const CallPtr& c);
  // The session's database step: 401 without a live session; for a POST,
  // 403 without a same-origin Origin or the session's CSRF token. `work`
  // runs in the step (its `answer` and `data_json` reach `then`).
  void withSession(const CallPtr& c, SessionWork work, SessionThen then);
  // withSession, answering `answer` / `data_json` as they are.
  void portalSimple(const CallPtr& c, SessionWork work);
  // The playground's stand-in for authorize(): the session's account.
  void portalAuthorize(const CallPtr& c, DbWork work, Then then);
  // Verifies the signed-in person's password off the loop: 403 if wrong.
  void checkPassword(const CallPtr& c, const std::string& password, PersonThen then);
  // Signs the person in (a session and its cookie); `forget_failures` are
  // the rows of this sign-in's attempt (Store::beginPasswordAttempt), taken
  // back in the same step.
  void startSession(const CallPtr& c, const std::string& person_id, const std::string& email,
                    std::vector<int64_t> forget_failures = {});
  // 429 with Retry-After when an attempt was limited (retry_at_ms > 0).
  bool tooManyAttempts(const CallPtr& c, int64_t retry_at_ms, int64_t now_ms,
                       std::string_view what);
  std::string sessionCookie(const std::string& session_id) const;
  void portalAnswer(const Info& info, const Responder& res, const Status& s,
                    std::string_view data_json, std::string_view msg);
  static void addPortalHeaders(HttpResponse& r);
  // Runs `work` (password hashing) on libuv's thread pool, then `then` on
  // the loop thread; hashingBusy() answers 503 while kMaxHashing run.
  void offLoop(std::function<void()> work, std::function<void()> then);
  // 503 with Retry-After while `limit` hashes run (checkPassword, for the
  // signed-in, gets half the slots).
  bool hashingBusy(const CallPtr& c, int limit = kMaxHashing);
  // A developer-center POST not from a page of its origin (see
  // portalOriginAllowed in api/validation.h): answers 403 and returns true.
  bool refuseCrossOrigin(const CallPtr& c);
  // The body of a link request ({"token", "password"}, from the page's
  // origin) into *token and, when given, *password; false when it was
  // answered (403, 400) instead.
  bool readLinkRequest(const CallPtr& c, std::string* token, std::string* password = nullptr);
  void setPasswordThroughLink(const CallPtr& c, const std::string& token,
                              const std::string& password);
  // Hashes `password` off the loop, runs `step` with the hash in a database
  // step (a link used, a person registered), then signs the person in,
  // taking back `forget_failures` (see startSession) only then.
  using PersonStep =
      std::function<Result<Person>(Store& store, const std::string& hash, int64_t now_ms)>;
  void hashThenSignIn(const CallPtr& c, const std::string& password, PersonStep step,
                      std::vector<int64_t> forget_failures = {});
  // EQ_PORTAL_SIGNUP=off: no registration and no invitation link admits anyone.
  bool signupClosed() const { return ctx_.config->portal_signup == "off"; }
  // A DbRequest stamped with the clock and the api's database deadline.
  std::unique_ptr<DbRequest> newDbRequest() const;
  static constexpr int kMaxHashing = 8;  // libuv's pool has 4 threads; a few may wait
  int hashing_in_flight_ = 0;            // loop thread
  std::set<std::string> checking_people_;  // loop thread: a checkPassword is hashing

  // Authentication and rate limit, with the route's database work in the
  // same batch: 401, 429 or 503 are answered here; `then` runs (on the loop)
  // only for an authenticated request within its limit whose work ran.
  void authorize(const CallPtr& c, DbWork work, bool writes, Then then);
  // The same for GET /quota, whose read the database thread makes for
  // every such request of a batch at once (DbRequest::reads_quota).
  using QuotaThen = std::function<void(const CallPtr& call, const AccountQuota& quota)>;
  void authorizeQuotaRead(const CallPtr& c, QuotaThen then);
  // The same for a key's call charged with the batch's others
  // (DbRequest::charge): `then` gets the charge's outcome.
  using ChargeThen = std::function<void(const CallPtr& call, ChargeOutcome outcome)>;
  void authorizeCharge(const CallPtr& c, Store::ChargeCall charge, ChargeThen then);
  // All three: `r` gets the key and its rate count; `then` runs as authorize()'s.
  using StepThen = std::function<void(const CallPtr& call, DbRequest& done)>;
  void keyStep(const CallPtr& c, std::unique_ptr<DbRequest> r, StepThen then);
  // Both reply endpoints: Idempotency-Key admission, charge and (async) the
  // task row in one database step.
  void reply(const CallPtr& c, bool async);
  void replyAdmitted(const CallPtr& c, bool async, ReplyAdmission& a);
  int64_t dbDeadline() const;

  void finish(const Info& info, const Responder& res, HttpResponse r);
  // A sync call answered 200 whose open charge is still to be closed.
  struct AnsweredCharge {
    std::string request_id;
    std::string account_id;
    std::string mode;
    int64_t tokens = 0;  // its tokens_used, for the usage record
  };
  std::vector<AnsweredCharge> answered_;  // loop thread
  static constexpr std::size_t kMaxClosesPerStep = 256;
  void send(const Info& info, const Responder& res, HttpResponse r);
  void sendJson(const Info& info, const Responder& res, int status, std::string_view data_json,
                std::string_view msg);
  // A JSON body already in its envelope.
  void sendBody(const Info& info, const Responder& res, int status, std::string body);
  void sendError(const Info& info, const Responder& res, int status, std::string_view msg);
  void unauthorized(const Info& info, const Responder& res);
  void unavailable(const Info& info, const Responder& res, std::string_view what,
                   int retry_after_s = 1);
  // unavailable() for a failed database step: busy, or unable to write.
  void databaseUnavailable(const Info& info, const Responder& res, const DbRequest& done);

  ApiContext ctx_;
  AuthCache auth_cache_;
  uint64_t reconnects_seen_ = 0;  // broker reconnects already added to the counter

  // /metrics: every series lives in the Registry; the names are those the
  // dashboards and alert rules use (tests/monitoring/check_metric_names.py).
  // Counts are per process. Used on the loop thread only.
  metrics::Registry registry_;
  metrics::Family<metrics::Counter>& requests_ = registry_.counter(
      "eq_api_requests_total", "HTTP requests answered, by route and status.",
      {"route", "status"});
  // Rendered in seconds: promtool refuses abbreviated units in metric names.
  metrics::Histogram& request_seconds_ =
      registry_
          .histogram("eq_api_request_duration_seconds",
                     "Time from request received to response queued.", {},
                     {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30})
          .get();
  metrics::Counter& rate_limited_ =
      registry_
          .counter("eq_api_rate_limited_total",
                   "Requests refused with 429 by the per-key rate limit.")
          .get();
  metrics::Counter& quota_rejected_ =
      registry_
          .counter("eq_api_quota_rejected_total",
                   "Reply calls refused with 402 (quota exhausted or expired).")
          .get();
  metrics::Counter& idempotent_replays_ =
      registry_
          .counter("eq_api_idempotent_replays_total",
                   "Stored responses replayed for a repeated Idempotency-Key.")
          .get();
  metrics::Gauge& in_flight_ =
      registry_.gauge("eq_api_in_flight", "Requests received and not yet answered.").get();
  metrics::Gauge& broker_connected_ =
      registry_.gauge("eq_api_broker_connected", "1 while the broker connection is up.").get();
  metrics::Counter& broker_reconnects_ =
      registry_.counter("eq_api_broker_reconnects_total", "Broker reconnections since start.")
          .get();
  metrics::Family<metrics::Counter>& messages_refused_ = registry_.counter(
      "eq_api_messages_refused_total",
      "Sync results dropped because their x-eq-signature was missing (unsigned) or wrong "
      "(bad_signature): not published by an eq-worker with this EQ_INTERNAL_KEY.",
      {"reason"});
  metrics::Counter& db_batches_ =
      registry_
          .counter("eq_api_db_batches_total",
                   "Transactions the database thread committed (or tried), each holding the "
                   "database steps of one or more requests.")
          .get();
  metrics::Gauge& start_time_ =
      registry_
          .gauge("process_start_time_seconds",
                 "Start time of this eq-api process since the Unix epoch; tells processes "
                 "sharing one port apart.")
          .get();
  uint64_t db_batches_seen_ = 0;
  // Reply calls by mode, for the dashboards' request rate and latency by
  // mode (issue 6).
  metrics::Family<metrics::Counter>& replies_ = registry_.counter(
      "eq_api_replies_total", "Reply calls answered, by mode, route (sync or async) and status.",
      {"mode", "route", "status"});
  metrics::Family<metrics::Histogram>& reply_seconds_ = registry_.histogram(
      "eq_api_reply_duration_seconds",
      "Reply calls from request received to response queued, by mode and route; sync calls "
      "include the worker's time.",
      {"mode", "route"},
      {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180});
};

}  // namespace eq::api

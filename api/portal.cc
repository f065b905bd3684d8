// The developer center's JSON (docs/contract.md §9): /portal/api/..., a resource
// of eq-api like any other. Requests carry the session cookie instead of a
// bearer key; every database step is a DbRequest on the database thread,
// and the slow, memory-hard password hashing runs on libuv's thread pool,
// never on the loop.
//
// Sessions and CSRF: the cookie eq_session holds a random 256-bit id (only
// its SHA-256 is stored); every POST needs an Origin equal to this host's
// and the session's CSRF token in X-CSRF-Token. Sign-in, registration and
// setting a password through a link have no session yet: they need the
// same-origin Origin only.
#include <uv.h>

#include <cassert>
#include <cctype>

#include "api/handlers.h"
#include "api/request_util.h"
#include "api/validation.h"
#include "common/ascii.h"
#include "common/crypto.h"
#include "common/defaults.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/password.h"
#include "common/utf8.h"

namespace eq::api {
using util::putQuota;
using util::putString;
using util::putTime;
using util::Writer;

namespace {

constexpr std::string_view kCookie = "eq_session";
constexpr int kJsonDepth = 8;
constexpr int kUsageDays = 30;
constexpr std::size_t kMaxEmailBytes = 254;
constexpr std::size_t kMaxPasswordBytes = 1024;  // bounds the KDF's input, not its cost
constexpr std::size_t kMaxKeyNameChars = 64;

// A plausible address: one @, something on both sides, a dot after it, no
// spaces or controls. Whether it receives mail is not ours to check.
bool plausibleEmail(const std::string& e) {
  if (e.empty() || e.size() > kMaxEmailBytes) return false;
  std::size_t at = e.find('@');
  if (at == 0 || at == std::string::npos || e.find('@', at + 1) != std::string::npos) return false;
  std::size_t dot = e.find('.', at + 2);
  if (dot == std::string::npos || dot + 1 >= e.size()) return false;
  for (unsigned char ch : e) {
    if (ch <= 0x20 || ch == 0x7f) return false;
  }
  return true;
}

// A new password: 400 naming `field` unless it has 10 code points and at
// most kMaxPasswordBytes bytes.
Status checkNewPassword(const std::string& pass, const char* field) {
  if (password::acceptable(pass) && pass.size() <= kMaxPasswordBytes) return Status::ok();
  return Status(400, std::string(field) + ": at least 10 characters (and at most 1024 bytes)");
}

// The sign-in limit's scope for a client address (HttpRequest::client, the
// raw bytes; IPv4-mapped peers already come as IPv4): an IPv4 address as it
// is, an IPv6 one by its /64, since one host is usually given a whole /64
// and could otherwise step through it to dodge the per-address limit.
std::string addressScope(const std::string& raw) {
  if (raw.empty()) return "addr:unknown";
  if (raw.size() == 16) return "addr:" + crypto::hex(raw.substr(0, 8)) + "/64";
  return "addr:" + crypto::hex(raw);
}

// The body as a JSON object; a 400 message otherwise.
Status parseObject(const std::string& body, rapidjson::Document* doc) {
  if (Status s = json::parse(body, doc, kJsonDepth); !s.isOk()) {
    return Status(400, "invalid JSON: " + s.msg());
  }
  if (!doc->IsObject()) return Status(400, "the body must be a JSON object");
  return Status::ok();
}

// A string member; absent or not a string reads as empty.
std::string member(const rapidjson::Document& doc, const char* name) {
  auto it = doc.FindMember(name);
  if (it == doc.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

void writeDelivery(Writer& w, const DeliveryRecord& d) {
  w.StartObject();
  putString(w, "delivery_id", d.delivery_id);
  putString(w, "task_id", d.task_id);
  putString(w, "event", d.event);
  putString(w, "url", d.url);
  putString(w, "status", deliveryStatusName(d.status));
  w.Key("attempts");
  w.Int(d.attempts);
  putTime(w, "created_at", d.created_at);
  putTime(w, "last_attempt_at", d.last_attempt_at);
  w.Key("last_status");
  if (d.last_status > 0) w.Int(d.last_status); else w.Null();
  putTime(w, "next_attempt_at", d.next_attempt_at);
  putString(w, "last_error", d.last_error);
  w.EndObject();
}

std::string text(const rapidjson::StringBuffer& sb) {
  return std::string(sb.GetString(), sb.GetSize());
}

// EQ_PORTAL_SIGNUP=off: nobody new comes in, by registration or by an
// invitation made before sign-up was closed. Existing people sign in, and
// reset links (which only set an existing person's password) still work.
constexpr std::string_view kSignupClosed =
    "sign-up is closed on this server (EQ_PORTAL_SIGNUP=off): no new accounts, and invitation "
    "links no longer work; people who already have an account sign in";

// The signed-in person's overview (/me, and /session when signed in):
// who, the CSRF token, quota, today's calls, the latest failures.
Status meJson(Store& store, const PortalSession& s, int64_t now, const std::string& env,
              bool signed_in, std::string* data) {
  Result<AccountQuota> q = store.quota(s.account_id);
  if (!q.isOk()) return q.status();
  int64_t midnight = now - now % (24 * 3'600'000LL);
  Result<std::vector<UsageRow>> today = store.usage(s.account_id, midnight);
  if (!today.isOk()) return today.status();
  TaskFilter failed;
  failed.status = TaskStatus::kFailed;
  failed.limit = 5;
  Result<std::vector<TaskRecord>> errors = store.accountTasks(s.account_id, failed);
  if (!errors.isOk()) return errors.status();
  Result<std::vector<DeliveryRecord>> bad =
      store.accountDeliveries(s.account_id, DeliveryStatus::kFailed, 5);
  if (!bad.isOk()) return bad.status();
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  if (signed_in) {
    w.Key("signed_in");
    w.Bool(true);
  }
  putString(w, "email", s.email);
  putString(w, "account_id", s.account_id);
  putString(w, "csrf", s.csrf);
  putString(w, "env", env);
  putQuota(w, q.value(), now);
  int64_t calls = 0, refunded = 0;
  for (const UsageRow& u : today.value()) {
    calls += u.calls;
    refunded += u.refunded;
  }
  w.Key("calls_today");
  w.Int64(calls);
  w.Key("refunded_today");
  w.Int64(refunded);
  w.Key("recent_failed_tasks");
  w.StartArray();
  for (const TaskRecord& t : errors.value()) {
    w.StartObject();
    putString(w, "task_id", t.task_id);
    putString(w, "mode", t.mode);
    w.Key("code");
    w.Int(t.error_code);
    putString(w, "msg", t.error_msg);
    putTime(w, "finished_at", t.finished_at);
    w.EndObject();
  }
  w.EndArray();
  w.Key("recent_failed_deliveries");
  w.StartArray();
  for (const DeliveryRecord& d : bad.value()) writeDelivery(w, d);
  w.EndArray();
  w.EndObject();
  *data = text(sb);
  return Status::ok();
}

// What a portal handler's database step leaves for its answer.
struct Step {
  Status answer;          // not ok: answered with its code and message
  std::string data_json;  // ok: the data of the envelope
  bool bad_csrf = false;
};

}  // namespace

// ---------------------------------------------------------------- plumbing

void ApiService::offLoop(std::function<void()> work, std::function<void()> then) {
  struct Job {
    uv_work_t req;
    std::function<void()> work;
    std::function<void()> then;
  };
  ++hashing_in_flight_;
  then = [this, then = std::move(then)] {
    --hashing_in_flight_;
    then();
  };
  auto* job = new Job{{}, std::move(work), std::move(then)};
  job->req.data = job;
  int rc = uv_queue_work(
      ctx_.loop, &job->req, [](uv_work_t* r) { static_cast<Job*>(r->data)->work(); },
      [](uv_work_t* r, int) {
        std::unique_ptr<Job> j(static_cast<Job*>(r->data));
        j->then();
      });
  if (rc != 0) {
    // Only when the loop is closing: run both here rather than lose the call.
    std::unique_ptr<Job> j(job);
    j->work();
    j->then();
  }
}

std::unique_ptr<DbRequest> ApiService::newDbRequest() const {
  auto r = std::make_unique<DbRequest>();
  r->now_ms = ctx_.clock->nowMs();
  r->deadline_ms = dbDeadline();
  return r;
}

bool ApiService::hashingBusy(const CallPtr& c, int limit) {
  // Each scrypt holds 32 MiB and a pool thread for ~0.1 s, and sign-in,
  // registration and links need no key: without a bound, a burst of them
  // would queue memory and CPU without limit. Past the bound: 503, retry.
  if (hashing_in_flight_ < limit) return false;
  c->info->extra_headers.emplace_back("Retry-After", "1");
  portalAnswer(c->info, c->res, Status(503, "busy checking passwords; retry after 1 s"), "", "");
  return true;
}

bool ApiService::tooManyAttempts(const CallPtr& c, int64_t retry_at_ms, int64_t now_ms,
                                 std::string_view what) {
  if (retry_at_ms <= 0) return false;
  int64_t secs = std::max<int64_t>(1, (retry_at_ms - now_ms + 999) / 1000);
  c->info->extra_headers.emplace_back("Retry-After", std::to_string(secs));
  portalAnswer(c->info, c->res,
               Status(429, "too many " + std::string(what) + "; retry after " +
                               std::to_string(secs) + " s"),
               "", "");
  return true;
}

bool ApiService::refuseCrossOrigin(const CallPtr& c) {
  if (portalOriginAllowed(c->req.header("origin"), c->req.header("host"),
                          ctx_.config->portal_origin, ctx_.config->portal_host)) {
    return false;
  }
  std::string msg = "cross-origin request refused";
  if (!ctx_.config->portal_origin.empty()) {
    msg += ": the developer center takes changes only from " + ctx_.config->portal_origin +
           " (EQ_PORTAL_URL)";
  }
  portalAnswer(c->info, c->res, Status(403, msg), "", "");
  return true;
}

void ApiService::portalAnswer(const Info& info, const Responder& res, const Status& s,
                              std::string_view data_json, std::string_view msg) {
  info->extra_headers.emplace_back("Cache-Control", "no-store");
  info->extra_headers.emplace_back("X-Content-Type-Options", "nosniff");
  if (!s.isOk()) {
    sendError(info, res, s.code(), s.msg());
    return;
  }
  sendJson(info, res, 200, data_json, msg);
}

void ApiService::withSession(const CallPtr& c, SessionWork work, SessionThen then) {
  bool mutating = c->req.method == "POST";
  if (mutating && refuseCrossOrigin(c)) return;
  std::string session_id = c->req.cookie(kCookie);
  if (session_id.empty()) {
    portalAnswer(c->info, c->res, Status(401, "not signed in"), "", "");
    return;
  }
  const std::string* csrf_header = c->req.header("x-csrf-token");
  std::string csrf = csrf_header != nullptr ? *csrf_header : "";
  auto step = std::make_shared<Step>();
  std::unique_ptr<DbRequest> r = newDbRequest();
  // The batch looks the session up before its account locks (DbRequest::
  // session_id) and runs `work` only when it found one; the request outlives
  // its work, so the work reads the session from it.
  r->session_id = session_id;
  const DbRequest* found = r.get();
  r->work = [step, found, csrf, mutating, work = std::move(work)](Store& store,
                                                                  const AuthContext*) -> Status {
    const PortalSession& session = *found->session;
    if (mutating && !crypto::constantTimeEqual(csrf, session.csrf)) {
      step->bad_csrf = true;
      return Status::ok();
    }
    return work(store, session, step->answer, step->data_json);
  };
  r->done = [this, c, step, then = std::move(then)](DbRequest& done) {
    if (!done.status.isOk()) {
      log::error("database step failed",
                 {{"request_id", c->info->request_id}, {"error", done.status.msg()}});
      unavailable(c->info, c->res, "the database is busy");
      return;
    }
    if (!done.session) {
      portalAnswer(c->info, c->res, Status(401, "not signed in, or the session ended"), "", "");
      return;
    }
    c->info->key_prefix = "portal:" + done.session->person_id;
    if (step->bad_csrf) {
      portalAnswer(c->info, c->res, Status(403, "missing or wrong X-CSRF-Token"), "", "");
      return;
    }
    then(c, *done.session, step->answer, step->data_json);
  };
  ctx_.db->submit(std::move(r));
}

void ApiService::portalSimple(const CallPtr& c, SessionWork work) {
  withSession(c, std::move(work),
              [this](const CallPtr& call, const PortalSession&, const Status& answer,
                     const std::string& data) {
                portalAnswer(call->info, call->res, answer, data.empty() ? "{}" : data, "ok");
              });
}

void ApiService::portalAuthorize(const CallPtr& c, DbWork work, Then then) {
  // The playground: the reply and analyze handlers, authenticated by the
  // session instead of a key. Their calls are charged to the account like
  // any other (their tasks name the key id "portal"), and counted against
  // the account's rate limit like any other, analyze too, in the same step
  // as the route's work (which runs only within the limit): one signed-in
  // session cannot queue more jobs than a key can.
  auto auth = std::make_shared<AuthContext>();
  auto rate = std::make_shared<RateDecision>();
  int64_t now = ctx_.clock->nowMs();
  withSession(
      c,
      [auth, rate, now, work = std::move(work)](Store& store, const PortalSession& s, Status&,
                                                std::string&) -> Status {
        Result<RateDecision> d = store.countPlaygroundRequest(s.account_id, now);
        if (!d.isOk()) return d.status();
        *rate = d.value();
        if (!rate->allowed) return Status::ok();
        auth->key_id = "portal";
        auth->account_id = s.account_id;
        auth->display_prefix = "portal";
        return work ? work(store, auth.get()) : Status::ok();
      },
      [this, auth, rate, then = std::move(then)](const CallPtr& call, const PortalSession&,
                                                 const Status&, const std::string&) {
        const Info& info = call->info;
        info->extra_headers.emplace_back("X-RateLimit-Limit", std::to_string(rate->limit));
        info->extra_headers.emplace_back("X-RateLimit-Remaining", std::to_string(rate->remaining));
        info->extra_headers.emplace_back("X-RateLimit-Reset", std::to_string(rate->reset_seconds));
        if (!rate->allowed) {
          rate_limited_.inc();
          info->extra_headers.emplace_back("Retry-After", std::to_string(rate->reset_seconds));
          sendError(info, call->res, 429,
                    "rate limit exceeded: " + std::to_string(rate->limit) +
                        " requests per minute for this account; retry after " +
                        std::to_string(rate->reset_seconds) + " s");
          return;
        }
        call->auth = *auth;
        then(call);
      });
}

bool ApiService::takePlaygroundSlot(const CallPtr& c) {
  // Per session, not per account: a person with two tabs open is not
  // refused, and a leaked session cannot hold more than its share of
  // workers (a sync call holds one, or an LLM call, until it is answered).
  // Counted by the cookie's value before the session is looked up: an
  // unknown one is answered 401 at once and gives its slot back.
  std::string session_id = c->req.cookie(kCookie);
  if (session_id.empty()) return true;  // withSession answers 401
  std::string slot = crypto::sha256(session_id);
  int& n = playground_in_flight_[slot];
  if (n >= defaults::kPlaygroundInFlightPerSession) {
    c->info->extra_headers.emplace_back("Retry-After", "1");
    portalAnswer(c->info, c->res,
                 Status(429, "at most " + std::to_string(defaults::kPlaygroundInFlightPerSession) +
                                 " playground calls at a time; retry after 1 s"),
                 "", "");
    return false;
  }
  ++n;
  c->info->playground_slot = std::move(slot);
  return true;
}

void ApiService::releasePlaygroundSlot(const std::string& slot) {
  auto it = playground_in_flight_.find(slot);
  assert(it != playground_in_flight_.end() && it->second > 0);
  if (--it->second == 0) playground_in_flight_.erase(it);
}

std::string ApiService::sessionCookie(const std::string& session_id) const {
  std::string cookie = std::string(kCookie) + "=" + session_id +
                       "; Path=/portal; HttpOnly; SameSite=Strict; Max-Age=" +
                       std::to_string(Store::kSessionMaxMs / 1000);
  if (!ctx_.config->portal_insecure_cookies) cookie += "; Secure";
  return cookie;
}

void ApiService::startSession(const CallPtr& c, const std::string& person_id,
                              const std::string& email, std::vector<int64_t> forget_failures) {
  auto created = std::make_shared<NewSession>();
  std::unique_ptr<DbRequest> r = newDbRequest();
  int64_t now = r->now_ms;
  r->work = [created, person_id, now, forget = std::move(forget_failures)](
                Store& store, const AuthContext*) -> Status {
    if (Status s = store.forgetSigninFailures(forget); !s.isOk()) return s;
    Result<NewSession> s = store.createSession(person_id, now);
    if (!s.isOk()) return s.status();
    *created = s.value();
    return Status::ok();
  };
  r->done = [this, c, created, email](DbRequest& done) {
    if (!done.status.isOk()) {
      unavailable(c->info, c->res, "the database is busy");
      return;
    }
    c->info->extra_headers.emplace_back("Set-Cookie", sessionCookie(created->session_id));
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "email", email);
    putString(w, "csrf", created->csrf);
    w.EndObject();
    portalAnswer(c->info, c->res, Status::ok(), text(sb), "signed in");
  };
  ctx_.db->submit(std::move(r));
}

// ---------------------------------------------------------------- no session yet

void ApiService::portalConfig(const CallPtr& c) {
  std::string data = "{\"signup\":\"" + ctx_.config->portal_signup + "\"}";
  portalAnswer(c->info, c->res, Status::ok(), data, "ok");
}

bool ApiService::readLinkRequest(const CallPtr& c, std::string* token, std::string* password) {
  if (refuseCrossOrigin(c)) return false;
  rapidjson::Document doc;
  if (Status s = parseObject(c->req.body, &doc); !s.isOk()) {
    portalAnswer(c->info, c->res, s, "", "");
    return false;
  }
  *token = member(doc, "token");
  if (password != nullptr) *password = member(doc, "password");
  if (token->empty() || token->size() > 64) {
    portalAnswer(c->info, c->res, Status(400, "token: the link's token is required"), "", "");
    return false;
  }
  return true;
}

void ApiService::portalLink(const CallPtr& c) {
  // POST with the token in the body: a path or a query string is what
  // reverse proxies and access logs keep, a body is not (docs/portal.md).
  std::string token;
  if (!readLinkRequest(c, &token)) return;
  auto link = std::make_shared<Result<PortalLink>>(Status(500, "not run"));
  std::unique_ptr<DbRequest> r = newDbRequest();
  r->writes = false;
  int64_t now = r->now_ms;
  r->work = [link, token, now](Store& store, const AuthContext*) -> Status {
    *link = store.usablePortalLink(token, now);
    return link->isOk() || link->status().code() < 500 ? Status::ok() : link->status();
  };
  r->done = [this, c, link](DbRequest& done) {
    if (!done.status.isOk()) {
      unavailable(c->info, c->res, "the database is busy");
      return;
    }
    if (!link->isOk()) {
      portalAnswer(c->info, c->res, link->status(), "", "");
      return;
    }
    if (link->value().kind == "invite" && signupClosed()) {
      portalAnswer(c->info, c->res, Status(403, std::string(kSignupClosed)), "", "");
      return;
    }
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "kind", link->value().kind);
    putString(w, "email", link->value().email);
    putTime(w, "expires_at", link->value().expires_at);
    w.EndObject();
    portalAnswer(c->info, c->res, Status::ok(), text(sb), "ok");
  };
  ctx_.db->submit(std::move(r));
}

void ApiService::portalUseLink(const CallPtr& c) {
  std::string token;
  std::string pass;
  if (!readLinkRequest(c, &token, &pass)) return;
  if (Status bad = checkNewPassword(pass, "password"); !bad.isOk()) {
    portalAnswer(c->info, c->res, bad, "", "");
    return;
  }
  // The link is checked first (a read): an unknown, used or refused token
  // costs no scrypt. The step that uses it checks again.
  auto link = std::make_shared<Result<PortalLink>>(Status(500, "not run"));
  std::unique_ptr<DbRequest> check = newDbRequest();
  check->writes = false;
  int64_t checked_at = check->now_ms;
  check->work = [link, token, checked_at](Store& store, const AuthContext*) -> Status {
    *link = store.usablePortalLink(token, checked_at);
    return link->isOk() || link->status().code() < 500 ? Status::ok() : link->status();
  };
  check->done = [this, c, link, token, pass](DbRequest& done) {
    if (!done.status.isOk()) {
      unavailable(c->info, c->res, "the database is busy");
      return;
    }
    if (!link->isOk()) {
      portalAnswer(c->info, c->res, link->status(), "", "");
      return;
    }
    // The setting is the process's and cannot change between this check
    // and the step that uses the link, so checking here is enough.
    if (link->value().kind == "invite" && signupClosed()) {
      portalAnswer(c->info, c->res, Status(403, std::string(kSignupClosed)), "", "");
      return;
    }
    if (hashingBusy(c)) return;
    setPasswordThroughLink(c, token, pass);
  };
  ctx_.db->submit(std::move(check));
}

void ApiService::setPasswordThroughLink(const CallPtr& c, const std::string& token,
                                        const std::string& pass) {
  hashThenSignIn(c, pass, [token](Store& store, const std::string& hash, int64_t now) {
    return store.usePortalLink(token, hash, now);
  });
}

void ApiService::hashThenSignIn(const CallPtr& c, const std::string& pass, PersonStep step,
                                std::vector<int64_t> forget_failures) {
  auto hashed = std::make_shared<std::string>();
  offLoop([hashed, pass] { *hashed = password::hash(pass); },
          [this, c, hashed, step = std::move(step), forget = std::move(forget_failures)] {
            if (hashed->empty()) {
              portalAnswer(c->info, c->res, Status(500, "password hashing failed"), "", "");
              return;
            }
            auto person = std::make_shared<Result<Person>>(Status(500, "not run"));
            std::unique_ptr<DbRequest> r = newDbRequest();
            int64_t now = r->now_ms;
            r->work = [person, hashed, now, step](Store& store, const AuthContext*) -> Status {
              *person = step(store, *hashed, now);
              // A refused link or a taken email is an answer, not a database failure.
              return person->isOk() || person->status().code() < 500 ? Status::ok()
                                                                     : person->status();
            };
            r->done = [this, c, person, forget](DbRequest& done) {
              if (!done.status.isOk()) {
                unavailable(c->info, c->res, "the database is busy");
                return;
              }
              if (!person->isOk()) {
                portalAnswer(c->info, c->res, person->status(), "", "");
                return;
              }
              log::info("portal password set", {{"request_id", c->info->request_id},
                                                {"person_id", person->value().person_id}});
              startSession(c, person->value().person_id, person->value().email, forget);
            };
            ctx_.db->submit(std::move(r));
          });
}

void ApiService::portalRegister(const CallPtr& c) {
  if (ctx_.config->portal_signup != "open") {
    portalAnswer(c->info, c->res,
                 signupClosed()
                     ? Status(403, std::string(kSignupClosed))
                     : Status(403, "registration is by invitation: ask the operator for a link"),
                 "", "");
    return;
  }
  if (refuseCrossOrigin(c)) return;
  rapidjson::Document doc;
  if (Status s = parseObject(c->req.body, &doc); !s.isOk()) {
    portalAnswer(c->info, c->res, s, "", "");
    return;
  }
  std::string email = lowerAscii(member(doc, "email"));
  std::string pass = member(doc, "password");
  if (!plausibleEmail(email)) {
    portalAnswer(c->info, c->res, Status(400, "email: an address like name@example.com"), "", "");
    return;
  }
  if (Status bad = checkNewPassword(pass, "password"); !bad.isOk()) {
    portalAnswer(c->info, c->res, bad, "", "");
    return;
  }
  if (hashingBusy(c)) return;
  // Every registration counts (issue 25), a successful one too: at most
  // EQ_PORTAL_REGISTRATIONS_PER_ADDRESS_DAY per client address (an IPv6
  // client by its /64) in 24 h, and EQ_PORTAL_REGISTRATIONS_PER_HOUR over
  // every address, since each account made gets 100 units per mode. The
  // count is taken before the slow hashing, in the step that checks it, so
  // registrations sent at the same moment cannot all slip under it.
  // Registering an email that has an account says so (409): without mail to
  // confirm an address there is no answer that hides it, since a new email
  // must get an account and a session. The same limit is what keeps this
  // from being a cheap way to learn who has an account: by default 5
  // probes a day per address (docs/portal.md, "Who may sign up").
  auto counted = std::make_shared<Store::PasswordAttempt>();
  std::unique_ptr<DbRequest> r = newDbRequest();
  int64_t now = r->now_ms;
  std::string prefix(Store::kRegisterScopePrefix);
  std::vector<Store::AttemptLimit> limits = {
      {prefix + addressScope(c->req.client), ctx_.config->portal_registrations_per_address_day,
       Store::kRegisterAddressWindowMs},
      {prefix + "all", ctx_.config->portal_registrations_per_hour, Store::kRegisterAllWindowMs}};
  r->work = [counted, limits, now](Store& store, const AuthContext*) -> Status {
    Result<Store::PasswordAttempt> a = store.beginLimitedAttempt(limits, now);
    if (!a.isOk()) return a.status();
    *counted = a.value();
    return Status::ok();
  };
  r->done = [this, c, counted, email, pass, now](DbRequest& done) {
    if (!done.status.isOk()) {
      unavailable(c->info, c->res, "the database is busy");
      return;
    }
    if (tooManyAttempts(c, counted->retry_at_ms, now,
                        "registrations (at most " +
                            std::to_string(ctx_.config->portal_registrations_per_address_day) +
                            " a day from one address and " +
                            std::to_string(ctx_.config->portal_registrations_per_hour) +
                            " an hour in all)")) {
      return;
    }
    if (hashingBusy(c)) {
      // Nothing was tried: this one does not count.
      std::unique_ptr<DbRequest> forget = newDbRequest();
      forget->work = [rows = counted->counted](Store& store, const AuthContext*) -> Status {
        return store.forgetSigninFailures(rows);
      };
      ctx_.db->submit(std::move(forget));
      return;
    }
    hashThenSignIn(c, pass, [email](Store& store, const std::string& hash, int64_t at) {
      return store.registerPerson(email, hash, at);
    });
  };
  ctx_.db->submit(std::move(r));
}

void ApiService::portalSignin(const CallPtr& c) {
  if (refuseCrossOrigin(c)) return;
  rapidjson::Document doc;
  if (Status s = parseObject(c->req.body, &doc); !s.isOk()) {
    portalAnswer(c->info, c->res, s, "", "");
    return;
  }
  struct Attempt {
    std::string email, password;
    Store::PasswordAttempt counted;
    std::optional<Person> person;
    bool ok = false;
  };
  auto a = std::make_shared<Attempt>();
  a->email = lowerAscii(member(doc, "email"));
  a->password = member(doc, "password");
  if (a->email.empty() || a->password.empty() || a->email.size() > kMaxEmailBytes ||
      a->password.size() > kMaxPasswordBytes) {
    portalAnswer(c->info, c->res, Status(400, "email and password are required"), "", "");
    return;
  }
  // Checked before the attempt is counted, so a busy 503 costs no attempt;
  // checked again after the step, as the pool may have filled meanwhile.
  if (hashingBusy(c)) return;
  std::vector<std::string> scopes = {"email:" + a->email, addressScope(c->req.client)};
  std::unique_ptr<DbRequest> r = newDbRequest();
  int64_t now = r->now_ms;
  r->work = [a, scopes, now](Store& store, const AuthContext*) -> Status {
    Result<Store::PasswordAttempt> counted = store.beginPasswordAttempt(scopes, now);
    if (!counted.isOk()) return counted.status();
    a->counted = counted.value();
    if (a->counted.retry_at_ms > 0) return Status::ok();
    Result<std::optional<Person>> p = store.personByEmail(a->email);
    if (!p.isOk()) return p.status();
    a->person = p.value();
    return Status::ok();
  };
  r->done = [this, c, a, now](DbRequest& done) {
    if (!done.status.isOk()) {
      unavailable(c->info, c->res, "the database is busy");
      return;
    }
    if (tooManyAttempts(c, a->counted.retry_at_ms, now, "failed sign-ins")) return;
    if (hashingBusy(c)) return;
    // The same work whether or not the email is known: an unknown email and
    // a wrong password take the same time and get the same answer. The
    // attempt is already counted as a failure; a right password takes it
    // back with the session's step.
    offLoop(
        [a] {
          if (a->person && a->person->status == "active" && !a->person->password_hash.empty()) {
            a->ok = password::verify(a->password, a->person->password_hash);
          } else {
            password::burnVerifyTime(a->password);
          }
        },
        [this, c, a] {
          if (!a->ok) {
            portalAnswer(c->info, c->res, Status(401, "wrong email or password"), "", "");
            return;
          }
          startSession(c, a->person->person_id, a->person->email, a->counted.counted);
        });
  };
  ctx_.db->submit(std::move(r));
}

// ---------------------------------------------------------------- session

void ApiService::portalSignout(const CallPtr& c) {
  std::string session_id = c->req.cookie(kCookie);
  withSession(
      c,
      [session_id](Store& store, const PortalSession&, Status&, std::string&) -> Status {
        return store.endSession(session_id);
      },
      [this](const CallPtr& call, const PortalSession&, const Status&, const std::string&) {
        std::string cookie = std::string(kCookie) + "=; Path=/portal; HttpOnly; SameSite=Strict; "
                                                    "Max-Age=0";
        if (!ctx_.config->portal_insecure_cookies) cookie += "; Secure";
        call->info->extra_headers.emplace_back("Set-Cookie", cookie);
        portalAnswer(call->info, call->res, Status::ok(), "{}", "signed out");
      });
}

void ApiService::portalMe(const CallPtr& c) {
  int64_t now = ctx_.clock->nowMs();
  std::string env = ctx_.config->env;
  portalSimple(
      c, [now, env](Store& store, const PortalSession& s, Status&, std::string& data) -> Status {
        return meJson(store, s, now, env, false, &data);
      });
}

void ApiService::portalSession(const CallPtr& c) {
  // The page's first question, "who is this?", answered 200 either way: a
  // signed-out visitor is not an error, and a 401 here would be one in
  // every fresh browser's console. Signed in, the answer is /me's.
  const std::string not_signed_in = "{\"signed_in\":false}";
  std::string session_id = c->req.cookie(kCookie);
  if (session_id.empty()) {
    portalAnswer(c->info, c->res, Status::ok(), not_signed_in, "not signed in");
    return;
  }
  auto data = std::make_shared<std::string>();
  std::unique_ptr<DbRequest> r = newDbRequest();
  int64_t now = r->now_ms;
  std::string env = ctx_.config->env;
  r->session_id = session_id;  // looked up by the batch; work runs if found
  const DbRequest* found = r.get();
  r->work = [data, found, now, env](Store& store, const AuthContext*) -> Status {
    return meJson(store, *found->session, now, env, true, data.get());
  };
  r->done = [this, c, data, not_signed_in](DbRequest& done) {
    if (!done.status.isOk()) {
      unavailable(c->info, c->res, "the database is busy");
      return;
    }
    bool in = !data->empty();
    portalAnswer(c->info, c->res, Status::ok(), in ? *data : not_signed_in,
                 in ? "signed in" : "not signed in, or the session ended");
  };
  ctx_.db->submit(std::move(r));
}

void ApiService::portalPassword(const CallPtr& c) {
  rapidjson::Document doc;
  if (Status s = parseObject(c->req.body, &doc); !s.isOk()) {
    portalAnswer(c->info, c->res, s, "", "");
    return;
  }
  std::string current = member(doc, "current_password");
  std::string next = member(doc, "new_password");
  if (Status bad = checkNewPassword(next, "new_password"); !bad.isOk()) {
    portalAnswer(c->info, c->res, bad, "", "");
    return;
  }
  checkPassword(c, current, [this, next](const CallPtr& call, const Person& p) {
    if (hashingBusy(call)) return;
    auto hashed = std::make_shared<std::string>();
    offLoop([hashed, next] { *hashed = password::hash(next); },
            [this, call, hashed, p] {
              auto created = std::make_shared<NewSession>();
              std::unique_ptr<DbRequest> r = newDbRequest();
              int64_t now = r->now_ms;
              r->work = [hashed, p, now, created](Store& store, const AuthContext*) -> Status {
                // Every session ends, this one too, and its holder gets a
                // new one: a copy of the old cookie (or of the old CSRF
                // token) is worth nothing after the change. Outstanding
                // reset and invite links are revoked with it.
                Result<NewSession> s = store.changePassword(p.person_id, *hashed, now);
                if (!s.isOk()) return s.status();
                *created = s.value();
                return Status::ok();
              };
              r->done = [this, call, created](DbRequest& done) {
                if (!done.status.isOk()) {
                  unavailable(call->info, call->res, "the database is busy");
                  return;
                }
                call->info->extra_headers.emplace_back("Set-Cookie",
                                                       sessionCookie(created->session_id));
                rapidjson::StringBuffer sb;
                Writer w(sb);
                w.StartObject();
                putString(w, "csrf", created->csrf);
                w.EndObject();
                portalAnswer(call->info, call->res, Status::ok(), text(sb),
                             "password changed; every other session ended");
              };
              ctx_.db->submit(std::move(r));
            });
  });
}

void ApiService::checkPassword(const CallPtr& c, const std::string& pass, PersonThen then) {
  // A signed-in person may check passwords only in a part of the hashing
  // slots (sign-ins keep the rest), one at a time, and with the sign-in
  // limit on wrong ones: a stolen session can neither starve sign-ins nor
  // guess at the password.
  if (hashingBusy(c, kMaxHashing / 2)) return;
  struct Check {
    std::optional<Person> person;
    Store::PasswordAttempt counted;
    bool ok = false;
  };
  auto check = std::make_shared<Check>();
  int64_t now = ctx_.clock->nowMs();
  withSession(
      c,
      [check, now](Store& store, const PortalSession& s, Status&, std::string&) -> Status {
        Result<std::optional<Person>> p = store.person(s.person_id);
        if (!p.isOk()) return p.status();
        check->person = p.value();
        Result<Store::PasswordAttempt> counted =
            store.beginPasswordAttempt({"person:" + s.person_id}, now);
        if (!counted.isOk()) return counted.status();
        check->counted = counted.value();
        return Status::ok();
      },
      [this, check, pass, now, then = std::move(then)](const CallPtr& call,
                                                       const PortalSession& session,
                                                       const Status&, const std::string&) {
        if (tooManyAttempts(call, check->counted.retry_at_ms, now, "wrong passwords")) return;
        if (checking_people_.count(session.person_id) > 0) {
          call->info->extra_headers.emplace_back("Retry-After", "1");
          portalAnswer(call->info, call->res,
                       Status(429, "a password check is already running; retry after 1 s"), "",
                       "");
          return;
        }
        if (hashingBusy(call, kMaxHashing / 2)) return;
        checking_people_.insert(session.person_id);
        offLoop(
            [check, pass] {
              if (check->person && !check->person->password_hash.empty()) {
                check->ok = password::verify(pass, check->person->password_hash);
              } else {
                password::burnVerifyTime(pass);
              }
            },
            [this, call, check, then, person_id = session.person_id] {
              checking_people_.erase(person_id);
              if (!check->ok) {
                portalAnswer(call->info, call->res, Status(403, "wrong password"), "", "");
                return;
              }
              // The right password takes its attempt back, in the batch of
              // whatever `then` writes.
              std::unique_ptr<DbRequest> forget = newDbRequest();
              forget->work = [rows = check->counted.counted](Store& store,
                                                              const AuthContext*) -> Status {
                return store.forgetSigninFailures(rows);
              };
              ctx_.db->submit(std::move(forget));
              then(call, *check->person);
            });
      });
}

// ---------------------------------------------------------------- keys

void ApiService::portalKeys(const CallPtr& c) {
  int64_t now = ctx_.clock->nowMs();
  portalSimple(c, [now](Store& store, const PortalSession& s, Status&, std::string& data) -> Status {
    Result<std::vector<AccountKey>> keys = store.accountKeys(s.account_id, now);
    if (!keys.isOk()) return keys.status();
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("keys");
    w.StartArray();
    for (const AccountKey& k : keys.value()) {
      w.StartObject();
      putString(w, "key_id", k.key_id);
      putString(w, "name", k.name);
      putString(w, "env", k.env);
      putString(w, "prefix", k.display_prefix);
      putString(w, "status", k.status);
      putTime(w, "created_at", k.created_at);
      putTime(w, "last_used_at", k.last_used_at);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    data = text(sb);
    return Status::ok();
  });
}

void ApiService::portalKeyCreate(const CallPtr& c) {
  rapidjson::Document doc;
  if (Status s = parseObject(c->req.body, &doc); !s.isOk()) {
    portalAnswer(c->info, c->res, s, "", "");
    return;
  }
  std::string name = trimUnicodeSpace(member(doc, "name"));
  std::string env = member(doc, "env");
  if (env.empty()) env = ctx_.config->env;
  if (name.empty() || codePoints(name) > kMaxKeyNameChars) {
    portalAnswer(c->info, c->res, Status(400, "name: 1 to 64 characters"), "", "");
    return;
  }
  if (utf8::hasDisplayControl(name)) {
    // Shown again in the page, in eqctl's terminal output and in logs: a
    // control character or a bidirectional override would change how
    // everything after it reads there.
    portalAnswer(c->info, c->res,
                 Status(400, "name: no control or bidirectional-formatting characters"), "", "");
    return;
  }
  if (env != ctx_.config->env) {
    // A key of the other environment would never authenticate here.
    portalAnswer(c->info, c->res,
                 Status(400, "env: this deployment issues " + ctx_.config->env + " keys"), "",
                 "");
    return;
  }
  int64_t now = ctx_.clock->nowMs();
  portalSimple(c, [name, env, now](Store& store, const PortalSession& s, Status& answer,
                                   std::string& data) -> Status {
    Result<CreatedKey> k = store.createAccountKey(s.account_id, name, env, now);
    if (!k.isOk() && k.status().code() == 409) {
      answer = k.status();
      return Status::ok();
    }
    if (!k.isOk()) return k.status();
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "key_id", k.value().key_id);
    putString(w, "api_key", k.value().api_key);
    putString(w, "prefix", k.value().display_prefix);
    putString(w, "name", name);
    putString(w, "env", env);
    w.EndObject();
    data = text(sb);
    return Status::ok();
  });
}

void ApiService::portalKeyChange(const CallPtr& c, bool rotate) {
  rapidjson::Document doc;
  if (Status s = parseObject(c->req.body, &doc); !s.isOk()) {
    portalAnswer(c->info, c->res, s, "", "");
    return;
  }
  std::string key_id = member(doc, "key_id");
  int64_t now = ctx_.clock->nowMs();
  portalSimple(c, [key_id, rotate, now](Store& store, const PortalSession& s, Status& answer,
                                        std::string& data) -> Status {
    Result<std::string> owner = store.accountOfKey(key_id);
    if (!owner.isOk() && owner.status().code() >= 500) return owner.status();
    if (!owner.isOk() || owner.value() != s.account_id) {
      answer = Status(404, "no key " + key_id + " in this account");
      return Status::ok();
    }
    if (!rotate) {
      Status r = store.revokeKey(key_id);
      if (r.code() >= 500) return r;
      answer = r.isOk() ? Status::ok() : Status(409, "the key is already revoked");
      data = "{}";
      return Status::ok();
    }
    Result<CreatedKey> k = store.rotateKey(key_id, std::nullopt, now);
    if (!k.isOk()) {
      if (k.status().code() >= 500) return k.status();
      answer = Status(409, "only an active key can be rotated");
      return Status::ok();
    }
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "key_id", k.value().key_id);
    putString(w, "api_key", k.value().api_key);
    putString(w, "prefix", k.value().display_prefix);
    w.EndObject();
    data = text(sb);
    return Status::ok();
  });
}

void ApiService::portalKeyRotate(const CallPtr& c) { portalKeyChange(c, true); }
void ApiService::portalKeyRevoke(const CallPtr& c) { portalKeyChange(c, false); }

// ---------------------------------------------------------------- usage

void ApiService::portalUsage(const CallPtr& c) {
  int64_t now = ctx_.clock->nowMs();
  portalSimple(c, [now](Store& store, const PortalSession& s, Status&, std::string& data) -> Status {
    constexpr int64_t kDay = 24 * 3'600'000LL;
    int64_t first_day = now - now % kDay - (kUsageDays - 1) * kDay;
    Result<std::vector<UsageRow>> rows = store.usage(s.account_id, first_day);
    if (!rows.isOk()) return rows.status();
    // Per day (UTC) and mode: calls, refunded, tokens.
    std::vector<std::array<UsageRow, 3>> days(kUsageDays);
    for (const UsageRow& u : rows.value()) {
      int64_t d = (u.hour - first_day) / kDay;
      std::optional<Mode> m = parseMode(u.mode);
      if (d < 0 || d >= kUsageDays || !m) continue;
      UsageRow& cell = days[static_cast<std::size_t>(d)][static_cast<std::size_t>(*m)];
      cell.calls += u.calls;
      cell.refunded += u.refunded;
      cell.tokens += u.tokens;
    }
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("days");
    w.StartArray();
    for (int d = 0; d < kUsageDays; ++d) {
      w.StartObject();
      std::string date = iso8601(first_day + d * kDay).substr(0, 10);
      putString(w, "date", date);
      for (Mode m : {Mode::kFast, Mode::kStandard, Mode::kPerfect}) {
        const UsageRow& cell = days[static_cast<std::size_t>(d)][static_cast<std::size_t>(m)];
        w.Key(std::string(modeName(m)).c_str());
        w.StartObject();
        w.Key("calls");
        w.Int64(cell.calls);
        w.Key("errors");
        w.Int64(cell.refunded);
        w.Key("tokens");
        w.Int64(cell.tokens);
        w.EndObject();
      }
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    data = text(sb);
    return Status::ok();
  });
}

// ---------------------------------------------------------------- playground

void ApiService::portalPlaygroundReply(const CallPtr& c) {
  if (!takePlaygroundSlot(c)) return;
  c->portal = true;
  reply(c, false);
}

void ApiService::portalPlaygroundAnalyze(const CallPtr& c) {
  if (!takePlaygroundSlot(c)) return;
  c->portal = true;
  analyze(c);
}

// ---------------------------------------------------------------- webhooks

void ApiService::portalWebhooks(const CallPtr& c) {
  int64_t now = ctx_.clock->nowMs();
  portalSimple(c, [now](Store& store, const PortalSession& s, Status&, std::string& data) -> Status {
    Result<WebhookSettings> ws = store.webhookSettings(s.account_id, now);
    if (!ws.isOk()) return ws.status();
    Result<std::vector<DeliveryRecord>> log =
        store.accountDeliveries(s.account_id, std::nullopt, 50);
    if (!log.isOk()) return log.status();
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "default_url", ws.value().default_url);
    putTime(w, "previous_secret_until", ws.value().previous_until);
    w.Key("deliveries");
    w.StartArray();
    for (const DeliveryRecord& d : log.value()) writeDelivery(w, d);
    w.EndArray();
    w.EndObject();
    data = text(sb);
    return Status::ok();
  });
}

void ApiService::portalWebhookUrl(const CallPtr& c) {
  rapidjson::Document doc;
  if (Status s = parseObject(c->req.body, &doc); !s.isOk()) {
    portalAnswer(c->info, c->res, s, "", "");
    return;
  }
  std::string url = member(doc, "url");
  std::string pass = member(doc, "password");
  if (!url.empty()) {
    if (Status s = checkWebhookUrl(url, *ctx_.webhook_allow); !s.isOk()) {
      portalAnswer(c->info, c->res, Status(400, "url: " + s.msg()), "", "");
      return;
    }
  }
  if (pass.empty()) {
    // Asked before anything is counted: a form sent without the field is
    // not a guess.
    portalAnswer(c->info, c->res,
                 Status(400, "password: enter your password to change the webhook URL"), "", "");
    return;
  }
  // The URL receives every result and test event of the account: changing
  // it asks for the password again, like the secret, so a stolen session
  // alone cannot redirect them.
  checkPassword(c, pass, [this, url](const CallPtr& call, const Person& p) {
    std::unique_ptr<DbRequest> r = newDbRequest();
    r->work = [url, account = p.account_id](Store& store, const AuthContext*) -> Status {
      return store.setDefaultWebhookUrl(account, url);
    };
    r->done = [this, call](DbRequest& done) {
      if (!done.status.isOk()) {
        unavailable(call->info, call->res, "the database is busy");
        return;
      }
      portalAnswer(call->info, call->res, Status::ok(), "{}", "ok");
    };
    ctx_.db->submit(std::move(r));
  });
}

void ApiService::portalWebhookSecret(const CallPtr& c, bool rotate) {
  rapidjson::Document doc;
  if (Status s = parseObject(c->req.body, &doc); !s.isOk()) {
    portalAnswer(c->info, c->res, s, "", "");
    return;
  }
  std::string pass = member(doc, "password");
  checkPassword(c, pass, [this, rotate](const CallPtr& call, const Person& p) {
    auto data = std::make_shared<std::string>();
    std::unique_ptr<DbRequest> r = newDbRequest();
    int64_t now = r->now_ms;
    r->work = [data, rotate, p, now](Store& store, const AuthContext*) -> Status {
      if (rotate) {
        Result<std::string> fresh = store.rotateWebhookSecret(p.account_id, now);
        if (!fresh.isOk()) return fresh.status();
      }
      Result<WebhookSettings> ws = store.webhookSettings(p.account_id, now);
      if (!ws.isOk()) return ws.status();
      rapidjson::StringBuffer sb;
      Writer w(sb);
      w.StartObject();
      putString(w, "secret", ws.value().secret);
      putString(w, "previous_secret", ws.value().previous_secret);
      putTime(w, "previous_secret_until", ws.value().previous_until);
      w.EndObject();
      *data = text(sb);
      return Status::ok();
    };
    r->done = [this, call, data, rotate](DbRequest& done) {
      if (!done.status.isOk()) {
        unavailable(call->info, call->res, "the database is busy");
        return;
      }
      portalAnswer(call->info, call->res, Status::ok(), *data,
                   rotate ? "secret rotated; the previous one signs too for 24 h" : "ok");
    };
    ctx_.db->submit(std::move(r));
  });
}

void ApiService::portalWebhookReveal(const CallPtr& c) { portalWebhookSecret(c, false); }
void ApiService::portalWebhookRotate(const CallPtr& c) { portalWebhookSecret(c, true); }

void ApiService::portalWebhookTest(const CallPtr& c) {
  int64_t now = ctx_.clock->nowMs();
  portalSimple(c, [now](Store& store, const PortalSession& s, Status& answer,
                        std::string& data) -> Status {
    Result<WebhookSettings> ws = store.webhookSettings(s.account_id, now);
    if (!ws.isOk()) return ws.status();
    if (ws.value().default_url.empty()) {
      answer = Status(409, "set a webhook URL first");
      return Status::ok();
    }
    Result<DeliveryRecord> d = store.createTestDelivery(s.account_id, ws.value().default_url, now);
    if (!d.isOk() && d.status().code() == 409) {
      answer = d.status();
      return Status::ok();
    }
    if (!d.isOk()) return d.status();
    rapidjson::StringBuffer sb;
    Writer w(sb);
    writeDelivery(w, d.value());
    data = text(sb);
    return Status::ok();
  });
}

void ApiService::portalDelivery(const CallPtr& c) {
  std::string id = c->req.path.substr(std::string_view("/portal/api/deliveries/").size());
  portalSimple(c, [id](Store& store, const PortalSession& s, Status& answer,
                       std::string& data) -> Status {
    Result<std::optional<DeliveryRecord>> d = store.delivery(id);
    if (!d.isOk()) return d.status();
    if (!d.value() || d.value()->account_id != s.account_id) {
      answer = Status(404, "no delivery " + id);
      return Status::ok();
    }
    Result<std::vector<DeliveryAttempt>> attempts = store.deliveryAttempts(id);
    if (!attempts.isOk()) return attempts.status();
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("delivery");
    writeDelivery(w, *d.value());
    w.Key("attempts");
    w.StartArray();
    for (const DeliveryAttempt& a : attempts.value()) {
      w.StartObject();
      w.Key("number");
      w.Int(a.number);
      putTime(w, "at", a.at);
      w.Key("http_status");
      if (a.http_status > 0) w.Int(a.http_status); else w.Null();
      w.Key("latency_ms");
      w.Int64(a.latency_ms);
      putString(w, "error", a.error);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    data = text(sb);
    return Status::ok();
  });
}

void ApiService::portalDeliveryReplay(const CallPtr& c) {
  rapidjson::Document doc;
  if (Status s = parseObject(c->req.body, &doc); !s.isOk()) {
    portalAnswer(c->info, c->res, s, "", "");
    return;
  }
  std::string id = member(doc, "delivery_id");
  int64_t now = ctx_.clock->nowMs();
  portalSimple(c, [id, now](Store& store, const PortalSession& s, Status& answer,
                            std::string& data) -> Status {
    Result<std::optional<DeliveryRecord>> d = store.delivery(id);
    if (!d.isOk()) return d.status();
    if (!d.value() || d.value()->account_id != s.account_id) {
      answer = Status(404, "no delivery " + id);
      return Status::ok();
    }
    Result<DeliveryRecord> replayed = store.replayDelivery(id, now);
    if (!replayed.isOk()) {
      if (replayed.status().code() >= 500) return replayed.status();
      answer = replayed.status();  // 409: still pending
      return Status::ok();
    }
    rapidjson::StringBuffer sb;
    Writer w(sb);
    writeDelivery(w, replayed.value());
    data = text(sb);
    return Status::ok();
  });
}

// ---------------------------------------------------------------- tasks

void ApiService::portalTasks(const CallPtr& c) {
  TaskFilter f;
  const std::string status = c->req.queryParam("status");
  f.status = parseTaskStatus(status);
  f.mode = c->req.queryParam("mode");
  if (!status.empty() && !f.status) {
    portalAnswer(c->info, c->res,
                 Status(400, "status: queued, running, succeeded or failed"), "", "");
    return;
  }
  if (!f.mode.empty() && !parseMode(f.mode)) {
    portalAnswer(c->info, c->res, Status(400, "mode: fast, standard or perfect"), "", "");
    return;
  }
  portalSimple(c, [f](Store& store, const PortalSession& s, Status&, std::string& data) -> Status {
    Result<std::vector<TaskRecord>> tasks = store.accountTasks(s.account_id, f);
    if (!tasks.isOk()) return tasks.status();
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("tasks");
    w.StartArray();
    for (const TaskRecord& t : tasks.value()) {
      w.StartObject();
      putString(w, "task_id", t.task_id);
      putString(w, "status", taskStatusName(t.status));
      putString(w, "mode", t.mode);
      putTime(w, "created_at", t.created_at);
      putTime(w, "finished_at", t.finished_at);
      w.Key("error_code");
      if (t.error_code != 0) w.Int(t.error_code); else w.Null();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    data = text(sb);
    return Status::ok();
  });
}

void ApiService::portalTask(const CallPtr& c) {
  std::string id = c->req.path.substr(std::string_view("/portal/api/tasks/").size());
  portalSimple(c, [id](Store& store, const PortalSession& s, Status& answer,
                       std::string& data) -> Status {
    Result<std::optional<TaskRecord>> t = store.task(id);
    if (!t.isOk()) return t.status();
    if (!t.value() || t.value()->account_id != s.account_id) {
      answer = Status(404, "no task " + id);
      return Status::ok();
    }
    Result<std::optional<DeliveryRecord>> d = store.deliveryForTask(id);
    if (!d.isOk()) return d.status();
    data = taskJson(*t.value(), d.value() ? &*d.value() : nullptr);
    return Status::ok();
  });
}

}  // namespace eq::api

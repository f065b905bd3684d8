// The route table and the routes that need no key: ApiService::handle
// dispatches through kRoutes alone; /metrics renders the Registry.
#include "api/client_address.h"
#include "api/handlers.h"
#include "api/request_util.h"
#include "common/embedded.h"

namespace eq::api {
using util::isJsonContentType;
using util::kTaskPrefix;
using util::putString;
using util::putTime;
using util::syncDeadlineMs;
using util::Writer;

// The route table. Every route and its handler is one row; the route label
// of logs and metrics is the row's path.
const std::array<ApiService::Route, 40> ApiService::kRoutes = {{
    {"/api/v1/reply", "POST", false, &ApiService::replySync},
    {"/api/v1/reply/async", "POST", false, &ApiService::replyAsync},
    {"/api/v1/analyze", "POST", false, &ApiService::analyze},
    {"/api/v1/quota", "GET", false, &ApiService::quota},
    {"/api/v1/task/{task_id}", "GET", true, &ApiService::task},
    {"/healthz", "GET", false, &ApiService::healthz},
    {"/readyz", "GET", false, &ApiService::readyz},
    {"/metrics", "GET", false, &ApiService::metrics},
    {"/openapi.yaml", "GET", false, &ApiService::openapi},
    // The developer center (docs/contract.md §9): its page and assets, then its
    // JSON under /portal/api/ (session cookie, not keys).
    {"/", "GET", false, &ApiService::portalRedirect},
    {"/portal", "GET", false, &ApiService::portalRedirect},
    {"/portal/", "GET", false, &ApiService::portalAsset},
    {"/portal/app.js", "GET", false, &ApiService::portalAsset},
    {"/portal/style.css", "GET", false, &ApiService::portalAsset},
    {"/portal/favicon.svg", "GET", false, &ApiService::portalAsset},
    {"/portal/api/config", "GET", false, &ApiService::portalConfig},
    // The token goes in the body, never in a path a proxy would log.
    {"/portal/api/links/check", "POST", false, &ApiService::portalLink},
    {"/portal/api/password/set", "POST", false, &ApiService::portalUseLink},
    {"/portal/api/register", "POST", false, &ApiService::portalRegister},
    {"/portal/api/signin", "POST", false, &ApiService::portalSignin},
    {"/portal/api/signout", "POST", false, &ApiService::portalSignout},
    {"/portal/api/me", "GET", false, &ApiService::portalMe},
    {"/portal/api/session", "GET", false, &ApiService::portalSession},
    {"/portal/api/password", "POST", false, &ApiService::portalPassword},
    {"/portal/api/keys", "GET", false, &ApiService::portalKeys},
    {"/portal/api/keys/create", "POST", false, &ApiService::portalKeyCreate},
    {"/portal/api/keys/rotate", "POST", false, &ApiService::portalKeyRotate},
    {"/portal/api/keys/revoke", "POST", false, &ApiService::portalKeyRevoke},
    {"/portal/api/usage", "GET", false, &ApiService::portalUsage},
    {"/portal/api/playground/reply", "POST", false, &ApiService::portalPlaygroundReply},
    {"/portal/api/playground/analyze", "POST", false, &ApiService::portalPlaygroundAnalyze},
    {"/portal/api/webhooks", "GET", false, &ApiService::portalWebhooks},
    {"/portal/api/webhooks/url", "POST", false, &ApiService::portalWebhookUrl},
    {"/portal/api/webhooks/secret", "POST", false, &ApiService::portalWebhookReveal},
    {"/portal/api/webhooks/rotate", "POST", false, &ApiService::portalWebhookRotate},
    {"/portal/api/webhooks/test", "POST", false, &ApiService::portalWebhookTest},
    // Exact paths before the parameter route that would also match them.
    {"/portal/api/deliveries/replay", "POST", false, &ApiService::portalDeliveryReplay},
    {"/portal/api/deliveries/{delivery_id}", "GET", true, &ApiService::portalDelivery},
    {"/portal/api/tasks", "GET", false, &ApiService::portalTasks},
    {"/portal/api/tasks/{task_id}", "GET", true, &ApiService::portalTask},
}};

const ApiService::Route* ApiService::matchRoute(std::string_view path) {
  for (const Route& r : kRoutes) {
    if (!r.prefix) {
      if (r.path == path) return &r;
      continue;
    }
    // "/api/v1/task/{task_id}": the prefix, then one non-empty segment.
    std::string_view prefix = r.path.substr(0, r.path.find('{'));
    if (path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix &&
        path.find('/', prefix.size()) == std::string_view::npos) {
      return &r;
    }
  }
  return nullptr;
}

void ApiService::handle(HttpRequest&& req, Responder res) {
  auto c = std::make_shared<Call>(Call{std::move(req), res, std::make_shared<RequestInfo>(), {}});
  const Info& info = c->info;
  info->request_id = c->req.request_id;
  info->method = c->req.method;
  info->started_ms = c->req.received_ms;
  in_flight_.add(1);
  if (ctx_.trusted_proxies != nullptr) {
    c->req.client = clientAddress(c->req, *ctx_.trusted_proxies);
  }
  info->client = addressText(c->req.client);
  // Secure cookies mean the developer center is served over https: every
  // answer of it tells the browser to keep to https (issue 25), the 404 of
  // an unknown page too.
  std::string_view path = c->req.path;
  info->hsts = ctx_.config->portal && !ctx_.config->portal_insecure_cookies &&
               (path == "/" || path.substr(0, 7) == "/portal");

  const Route* route = matchRoute(c->req.path);
  if (route != nullptr && !ctx_.config->portal &&
      (route->path == "/" || route->path.substr(0, 7) == "/portal")) {
    route = nullptr;  // EQ_PORTAL=off: the developer center does not exist
  }
  if (route == nullptr) {
    info->route = "unmatched";
    sendError(info, res, 404, "not found: no route " + c->req.path);
    return;
  }
  info->route = std::string(route->path);
  // HEAD is answered wherever GET is, as GET without the body (the HTTP
  // server drops it); it counts against the rate limit like the GET would.
  bool get_route = route->method == std::string_view("GET");
  if (c->req.method != route->method && !(get_route && c->req.method == "HEAD")) {
    std::string allow = get_route ? "GET, HEAD" : std::string(route->method);
    HttpResponse r =
        HttpServer::errorResponse(405, "method not allowed: use " + allow, info->request_id);
    r.headers.emplace_back("Allow", allow);
    finish(info, res, std::move(r));
    return;
  }
  (this->*route->handler)(c);
}

int64_t ApiService::dbDeadline() const { return ctx_.clock->nowMs() + ctx_.config->api_db_wait_ms; }

// ---------------------------------------------------------------- public routes

void ApiService::healthz(const CallPtr& c) {
  sendJson(c->info, c->res, 200, "{\"status\":\"alive\"}", "ok");
}

void ApiService::metrics(const CallPtr& c) {
  HttpResponse r;
  r.headers.emplace_back("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  r.body = renderMetrics();
  finish(c->info, c->res, std::move(r));
}

void ApiService::openapi(const CallPtr& c) {
  HttpResponse r;
  r.headers.emplace_back("Content-Type", "application/yaml; charset=utf-8");
  r.body = std::string(embedded::file("schema/openapi.yaml"));
  finish(c->info, c->res, std::move(r));
}

void ApiService::readyz(const CallPtr& c) {
  // A database step that reads the key epoch, the first thing every
  // authenticated request needs: it succeeds when its batch began (on
  // SQLite BEGIN IMMEDIATE, which takes the write lock, because every
  // request eq-api serves writes: a database that can be read but not
  // written is not ready) and the read got through within the deadline (on
  // PostgreSQL, a server that answers and a table nobody holds locked). The
  // loop thread itself never waits. Neither writes, so the step succeeds on
  // a full disk too: it also asks whether the last write failed for want of
  // space (or an I/O error) and none has committed since
  // (Store::storageFailing). That clears without traffic: the instance
  // heartbeat keeps trying to write.
  auto r = std::make_unique<DbRequest>();
  r->now_ms = ctx_.clock->nowMs();
  r->deadline_ms = dbDeadline();
  r->writes = false;
  r->work = [](Store& store, const AuthContext*) {
    if (Result<int64_t> epoch = store.keyEpoch(); !epoch.isOk()) return epoch.status();
    return store.storageStatus();
  };
  r->done = [this, c](DbRequest& done) {
    bool broker = ctx_.broker->connected();
    bool db = done.status.isOk();
    std::string data = std::string("{\"broker\":") + (broker ? "true" : "false") +
                       ",\"database\":" + (db ? "true" : "false") + "}";
    if (broker && db) {
      sendJson(c->info, c->res, 200, data, "ready");
      return;
    }
    // Like every error, data is null (docs/contract.md §2); msg names what is down.
    std::string msg = "not ready:";
    if (!broker) msg += " broker unavailable";
    if (!db) msg += std::string(broker ? "" : ",") + " database unavailable";
    if (done.storage_failed) msg += " (it cannot write: disk full or I/O error)";
    HttpResponse resp = HttpServer::errorResponse(503, msg, c->info->request_id);
    resp.headers.emplace_back("Retry-After", "1");
    finish(c->info, c->res, std::move(resp));
  };
  ctx_.db->submit(std::move(r));
}

std::string ApiService::renderMetrics() {
  broker_connected_.set(ctx_.broker->connected() ? 1 : 0);
  uint64_t reconnects = ctx_.broker->reconnects();
  if (reconnects > reconnects_seen_) {
    broker_reconnects_.inc(static_cast<double>(reconnects - reconnects_seen_));
    reconnects_seen_ = reconnects;
  }
  // Set from the bridge's running totals (they only grow), which also
  // creates both series at zero for dashboards.
  uint64_t unsigned_seen = ctx_.broker->refusedUnsigned();
  uint64_t bad_seen = ctx_.broker->refusedBadSignature();
  metrics::Counter& refused_unsigned = messages_refused_.with({"unsigned"});
  metrics::Counter& refused_bad = messages_refused_.with({"bad_signature"});
  refused_unsigned.inc(static_cast<double>(unsigned_seen) - refused_unsigned.value());
  refused_bad.inc(static_cast<double>(bad_seen) - refused_bad.value());
  auto batches = static_cast<uint64_t>(ctx_.db->batches());
  if (batches > db_batches_seen_) {
    db_batches_.inc(static_cast<double>(batches - db_batches_seen_));
    db_batches_seen_ = batches;
  }
  return registry_.render();
}

}  // namespace eq::api

// How ApiService answers: the envelope, the error shapes, and send(),
// which counts the request and writes the access log line.
#include "api/handlers.h"

#include "common/json.h"
#include "common/log.h"

namespace eq::api {
// ---------------------------------------------------------------- answers

void ApiService::sendJson(const Info& info, const Responder& res, int status,
                          std::string_view data_json, std::string_view msg) {
  sendBody(info, res, status, json::envelope(status == 200 ? 0 : status, data_json, msg));
}

void ApiService::sendBody(const Info& info, const Responder& res, int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
  r.body = std::move(body);
  finish(info, res, std::move(r));
}

void ApiService::unauthorized(const Info& info, const Responder& res) {
  HttpResponse r = HttpServer::errorResponse(
      401, "invalid API key: send Authorization: Bearer <API_KEY>", info->request_id);
  r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"eq-reply\"");
  finish(info, res, std::move(r));
}

void ApiService::sendError(const Info& info, const Responder& res, int status,
                           std::string_view msg) {
  finish(info, res, HttpServer::errorResponse(status, msg, info->request_id));
}

void ApiService::unavailable(const Info& info, const Responder& res, std::string_view what,
                             int retry_after_s) {
  // One second is a guess that matches how these clear up: the write lock
  // is held for milliseconds, and the broker bridge reconnects within ~1 s.
  std::string secs = std::to_string(retry_after_s);
  info->extra_headers.emplace_back("Retry-After", secs);
  sendError(info, res, 503,
            "temporarily unavailable: " + std::string(what) + "; retry after " + secs + " s");
}

void ApiService::databaseUnavailable(const Info& info, const Responder& res,
                                     const DbRequest& done) {
  // A full disk lasts until an operator frees space: a longer wait than a
  // busy lock's, and a message that says which it is (the store's own
  // text stays in the log).
  if (done.storage_failed) {
    unavailable(info, res, "the database cannot store data (disk full or I/O error)",
                DbThread::kStorageRetryAfterS);
    return;
  }
  unavailable(info, res, "the database is busy");
}

void ApiService::send(const Info& info, const Responder& res, HttpResponse r) {
  int64_t latency = ctx_.clock->nowMs() - info->started_ms;
  in_flight_.add(-1);
  if (!info->playground_slot.empty()) releasePlaygroundSlot(info->playground_slot);
  info->playground_slot.clear();
  requests_.with({info->route, std::to_string(r.status)}).inc();
  request_seconds_.observe(static_cast<double>(latency) / 1000.0);
  if (!info->mode.empty()) {
    replies_.with({info->mode, info->route, std::to_string(r.status)}).inc();
    reply_seconds_.with({info->mode, info->route}).observe(static_cast<double>(latency) / 1000.0);
  }
  log::info("request", {{"request_id", info->request_id},
                        {"key_prefix", info->key_prefix},
                        {"client", info->client},
                        {"method", info->method},
                        {"route", info->route},
                        {"status", static_cast<long long>(r.status)},
                        {"latency_ms", static_cast<long long>(latency)}});
  res.send(std::move(r));
}

}  // namespace eq::api

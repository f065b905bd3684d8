// Metrics end to end (ctest `metrics`, issue 6 item 3): a real stack runs a
// sync reply, an analysis and an async task with a webhook; then /metrics of
// eq-api, eq-worker and eq-dispatcher must pass `promtool check metrics`
// (Debian's prometheus package) and show exactly that traffic; a broker
// connection closed from the management API must count as a reconnect; and
// every metric name the Grafana dashboards and alert rules use must exist in
// what our processes and the test broker's RabbitMQ actually expose.
#define BOOST_TEST_MODULE eq_metrics
#include <rapidjson/document.h>
#include <sys/wait.h>

#include <boost/test/unit_test.hpp>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/integration/stack.h"

using eq::it::HttpResult;
using eq::it::Stack;

namespace {

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// The port a worker or the dispatcher logged in its "metrics listening" line.
int metricsPort(Stack& stack, const std::string& process) {
  std::string line = stack.process(process)->waitForLog("\"msg\":\"metrics listening\"", 10000);
  size_t at = line.find("\"port\":");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, process << " logged no metrics port");
  return std::stoi(line.substr(at + 7));
}

std::string local(int port, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(port) + path;
}

// Samples of one scrape: "name{labels}" exactly as exposed -> value.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return out;
}

double sample(const std::string& text, const std::string& series) {
  auto s = samples(text);
  auto it = s.find(series);
  BOOST_REQUIRE_MESSAGE(it != s.end(), "no series " << series << " in:\n" << text);
  return it->second;
}

std::string scrape(int port) {
  HttpResult r = eq::it::httpRequest("GET", local(port, "/metrics"));
  BOOST_REQUIRE_EQUAL(r.status, 200);
  BOOST_TEST(r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8");
  return r.body;
}

// Polls a scrape until `series` reaches `want` (metrics are updated just
// after the event the test waits for, e.g. after the webhook's answer).
std::string waitForSample(int port, const std::string& series, double want,
                          int timeout_ms = 10000) {
  int64_t until = eq::it::nowMs() + timeout_ms;
  std::string text;
  while (true) {
    text = scrape(port);
    auto s = samples(text);
    auto it = s.find(series);
    if ((it != s.end() && it->second == want) || eq::it::nowMs() > until) break;
    eq::it::sleepMs(50);
  }
  BOOST_TEST(sample(text, series) == want, series);
  return text;
}

// Runs a shell command; returns its exit status and fills *output with
// stdout and stderr.
int run(const std::string& cmd, std::string* output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  BOOST_REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  output->clear();
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int rc = pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// `promtool check metrics` on a scrape: exit 0 and no complaint.
void promtoolAccepts(Stack& stack, const std::string& name, const std::string& text) {
  std::string path = stack.dir() + "/" + name + ".prom";
  writeFile(path, text);
  std::string out;
  int rc = run("promtool check metrics < '" + path + "'", &out);
  BOOST_TEST(rc == 0, name << ": promtool check metrics exit " << rc << ": " << out);
  BOOST_TEST(out.empty(), name << ": promtool: " << out);
}

std::string percentEncode(const std::string& s) {
  std::string out;
  char hex[4];
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// Closes the broker connection named `connection_name` (eq-worker fast,
// eq-dispatcher) from the management API, as an operator or a network
// failure would. Returns false when it never showed up.
bool closeConnection(Stack& stack, const std::string& connection_name) {
  int64_t until = eq::it::nowMs() + 15000;  // the management API lists it after a stats tick
  while (eq::it::nowMs() < until) {
    HttpResult list = stack.management("/vhosts/{vhost}/connections");
    rapidjson::Document d;
    d.Parse(list.body.c_str());
    if (d.IsArray()) {
      for (const auto& c : d.GetArray()) {
        if (!c.HasMember("client_properties") || !c["client_properties"].IsObject()) continue;
        const auto& props = c["client_properties"];
        if (!props.HasMember("connection_name") ||
            connection_name != props["connection_name"].GetString()) {
          continue;
        }
        std::string url = "http://" + envOr("EQ_TEST_AMQP_USER", "eq") + ":" +
                          envOr("EQ_TEST_AMQP_PASSWORD", "eq") +
                          "@127.0.0.1:" + envOr("EQ_TEST_MGMT_PORT", "15672") +
                          "/api/connections/" + percentEncode(c["name"].GetString());
        HttpResult r = eq::it::httpRequest("DELETE", url);
        return r.status == 204 || r.status == 200;
      }
    }
    eq::it::sleepMs(200);
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_process_exposes_valid_metrics_that_follow_the_traffic) {
  eq::it::StackOptions opts;
  opts.worker_modes = {"fast"};  // fast also serves analyze
  Stack stack(opts);
  int worker = metricsPort(stack, "worker-fast");
  int dispatcher = metricsPort(stack, "dispatcher");
  eq::it::Key key = eq::it::createKey(stack, "metrics");

  // /healthz: broker (and database) up once the processes consume.
  HttpResult wh = eq::it::httpRequest("GET", local(worker, "/healthz"));
  BOOST_TEST(wh.status == 200, wh.body);
  BOOST_TEST(wh.body.find("\"broker\":\"up\"") != std::string::npos, wh.body);
  HttpResult dh;
  for (int i = 0; i < 100; ++i) {  // the database check runs on the first metrics tick
    dh = eq::it::httpRequest("GET", local(dispatcher, "/healthz"));
    if (dh.status == 200) break;
    eq::it::sleepMs(50);
  }
  BOOST_TEST(dh.status == 200, dh.body);
  BOOST_TEST(dh.body.find("\"database\":\"up\"") != std::string::npos, dh.body);

  // Traffic: a sync reply, an analysis, an async task with a webhook.
  HttpResult sync =
      eq::it::post(stack, "/api/v1/reply",
                   R"({"mode":"fast","message":"今天被老板骂了，好难过","reply_count":2})", key);
  BOOST_REQUIRE_MESSAGE(sync.status == 200, sync.body);
  int64_t sync_tokens = eq::it::parse(sync)["data"]["tokens_used"].GetInt64();
  HttpResult an = eq::it::post(stack, "/api/v1/analyze", R"({"message":"你怎么又迟到了！"})", key);
  BOOST_REQUIRE_MESSAGE(an.status == 200, an.body);
  std::string hook = "http://127.0.0.1:" + std::to_string(stack.receiver.port()) + "/hook";
  HttpResult async = eq::it::post(
      stack, "/api/v1/reply/async",
      R"({"mode":"fast","message":"Thanks for dinner tonight!","webhook_url":")" + hook + "\"}",
      key);
  BOOST_REQUIRE_MESSAGE(async.status == 200, async.body);
  BOOST_REQUIRE_MESSAGE(stack.receiver.waitFor(1, 30000), "no webhook arrived");
  rapidjson::Document webhook;
  webhook.Parse(stack.receiver.received().at(0).body.c_str());
  int64_t async_tokens = webhook["tokens_used"].GetInt64();

  // eq-dispatcher: one task's events, one delivery on the first attempt.
  std::string d =
      waitForSample(dispatcher, "eq_dispatcher_webhook_deliveries_total{outcome=\"delivered\"}", 1);
  BOOST_TEST(sample(d, "eq_dispatcher_task_events_total{type=\"task.running\"}") == 1);
  BOOST_TEST(sample(d, "eq_dispatcher_task_events_total{type=\"task.succeeded\"}") == 1);
  BOOST_TEST(sample(d, "eq_dispatcher_task_events_total{type=\"task.failed\"}") == 0);
  BOOST_TEST(sample(d, "eq_dispatcher_webhook_attempts_total{outcome=\"delivered\"}") == 1);
  BOOST_TEST(sample(d, "eq_dispatcher_webhook_attempts_total{outcome=\"retry\"}") == 0);
  BOOST_TEST(sample(d, "eq_dispatcher_webhook_deliveries_total{outcome=\"failed\"}") == 0);
  BOOST_TEST(sample(d, "eq_dispatcher_webhook_delivery_latency_seconds_count") == 1);
  BOOST_TEST(sample(d, "eq_dispatcher_webhook_delivery_latency_seconds_bucket{le=\"+Inf\"}") == 1);
  // The builtin engine and a local receiver: delivered within 10 s of the event.
  BOOST_TEST(sample(d, "eq_dispatcher_webhook_delivery_latency_seconds_bucket{le=\"10\"}") == 1);
  BOOST_TEST(
      sample(d, "eq_dispatcher_webhook_attempt_duration_seconds_count{outcome=\"delivered\"}") ==
      1);
  BOOST_TEST(sample(d, "eq_dispatcher_broker_connected") == 1);
  BOOST_TEST(sample(d, "eq_dispatcher_broker_reconnects_total") == 0);
  BOOST_TEST(sample(d, "eq_dispatcher_database_up") == 1);
  BOOST_TEST(sample(d, "eq_dispatcher_webhook_in_flight") == 0);
  // The pending count is refreshed every 5 s: the delivery has left it by then.
  d = waitForSample(dispatcher, "eq_dispatcher_webhook_pending", 0, 8000);

  // eq-worker: two fast replies (sync and async) and one analysis.
  std::string w = scrape(worker);
  BOOST_TEST(
      sample(w, "eq_worker_jobs_total{mode=\"fast\",kind=\"reply\",outcome=\"succeeded\"}") == 2);
  BOOST_TEST(
      sample(w, "eq_worker_jobs_total{mode=\"analyze\",kind=\"analyze\",outcome=\"succeeded\"}") ==
      1);
  BOOST_TEST(sample(w, "eq_worker_jobs_total{mode=\"fast\",kind=\"reply\",outcome=\"failed\"}") ==
             0);
  BOOST_TEST(sample(w, "eq_worker_job_duration_seconds_count{mode=\"fast\"}") == 2);
  BOOST_TEST(sample(w, "eq_worker_job_duration_seconds_bucket{mode=\"fast\",le=\"+Inf\"}") == 2);
  BOOST_TEST(sample(w, "eq_worker_job_duration_seconds_count{mode=\"analyze\"}") == 1);
  BOOST_TEST(sample(w, "eq_worker_job_duration_seconds_sum{mode=\"fast\"}") > 0);
  // Exactly the tokens the two replies reported to their callers.
  BOOST_TEST(sample(w, "eq_worker_engine_tokens_total{mode=\"fast\"}") ==
             static_cast<double>(sync_tokens + async_tokens));
  BOOST_TEST(sample(w, "eq_worker_broker_connected") == 1);
  BOOST_TEST(sample(w, "eq_worker_broker_reconnects_total") == 0);

  // eq-api (its own /metrics, on the API port).
  HttpResult am = eq::it::get(stack, "/metrics");
  BOOST_REQUIRE_EQUAL(am.status, 200);
  BOOST_TEST(sample(am.body, "eq_api_requests_total{route=\"/api/v1/reply\",status=\"200\"}") == 1);
  BOOST_TEST(
      sample(am.body, "eq_api_requests_total{route=\"/api/v1/reply/async\",status=\"200\"}") == 1);
  BOOST_TEST(sample(am.body, "eq_api_requests_total{route=\"/api/v1/analyze\",status=\"200\"}") ==
             1);

  // Reply calls by mode (the dashboards' request rate and latency by mode).
  BOOST_TEST(sample(am.body,
                    "eq_api_replies_total{mode=\"fast\",route=\"/api/v1/reply\",status=\"200\"}") ==
             1);
  BOOST_TEST(
      sample(am.body,
             "eq_api_replies_total{mode=\"fast\",route=\"/api/v1/reply/async\",status=\"200\"}") ==
      1);
  BOOST_TEST(sample(am.body,
                    "eq_api_reply_duration_seconds_count{mode=\"fast\",route=\"/api/v1/"
                    "reply\"}") == 1);
  BOOST_TEST(sample(am.body, "eq_api_request_duration_seconds_count") >= 4);

  // Every endpoint passes promtool.
  promtoolAccepts(stack, "api", am.body);
  promtoolAccepts(stack, "worker", w);
  promtoolAccepts(stack, "dispatcher", d);

  // Reconnects: close the worker's and the dispatcher's broker connections.
  BOOST_REQUIRE(closeConnection(stack, "eq-worker fast"));
  BOOST_REQUIRE(closeConnection(stack, "eq-dispatcher"));
  waitForSample(worker, "eq_worker_broker_reconnects_total", 1);
  waitForSample(dispatcher, "eq_dispatcher_broker_reconnects_total", 1);
  waitForSample(worker, "eq_worker_broker_connected", 1);
  // And the stack still works after them.
  HttpResult again =
      eq::it::post(stack, "/api/v1/reply", R"({"mode":"fast","message":"再来一次"})", key);
  BOOST_TEST(again.status == 200, again.body);
  waitForSample(worker, "eq_worker_jobs_total{mode=\"fast\",kind=\"reply\",outcome=\"succeeded\"}",
                3);

  // Dashboards and alert rules use only names that exist: ours (just
  // scraped, every series present) and RabbitMQ's, from the endpoints that
  // deploy/monitoring/prometheus.yml scrapes.
  std::string prom = envOr("EQ_TEST_PROM_PORT", envOr("EQ_RABBITMQ_PROM_PORT", ""));
  BOOST_REQUIRE_MESSAGE(!prom.empty(), "EQ_TEST_PROM_PORT is not set (run through scripts/test)");
  HttpResult rmq = eq::it::httpRequest("GET", "http://127.0.0.1:" + prom + "/metrics");
  BOOST_REQUIRE_EQUAL(rmq.status, 200);
  // Per-queue statistics appear once the broker has emitted them for the
  // stack's new queues (every collect_statistics_interval: 5 s by default, 1 s under scripts/test):
  // a stack that gets here quickly asks before the first emission.
  HttpResult rmq_queues;
  for (int64_t until = eq::it::nowMs() + 15000; eq::it::nowMs() < until; eq::it::sleepMs(250)) {
    rmq_queues = eq::it::httpRequest(
        "GET", "http://127.0.0.1:" + prom +
                   "/metrics/detailed?family=queue_coarse_metrics&family=queue_consumer_count");
    if (rmq_queues.status == 200 &&
        rmq_queues.body.find("rabbitmq_detailed_queue_messages_ready{") != std::string::npos) {
      break;
    }
  }
  BOOST_REQUIRE_EQUAL(rmq_queues.status, 200);
  BOOST_TEST(rmq_queues.body.find("rabbitmq_detailed_queue_messages_ready{") != std::string::npos);
  std::string dir = stack.dir();
  writeFile(dir + "/rabbitmq.prom", rmq.body);
  writeFile(dir + "/rabbitmq-queues.prom", rmq_queues.body);
  std::string src = envOr("EQ_SOURCE_DIR", "");
  BOOST_REQUIRE(!src.empty());
  std::string files = dir + "/api.prom " + dir + "/worker.prom " + dir + "/dispatcher.prom " + dir +
                      "/rabbitmq.prom " + dir + "/rabbitmq-queues.prom";
  std::string check = "python3 " + src + "/tests/monitoring/check_metric_names.py --dashboards " +
                      src + "/deploy/monitoring/grafana/dashboards --rules " + src +
                      "/deploy/monitoring/alerts.yml ";
  std::string out;
  int rc = run(check + files, &out);
  BOOST_TEST(rc == 0, "dashboards use unknown metrics:\n" << out);
  BOOST_TEST_MESSAGE("dashboard names: " << out);

  // The check itself catches a renamed metric.
  std::string bad = dir + "/bad-dashboards";
  BOOST_REQUIRE(run("mkdir -p '" + bad + "'", &out) == 0);
  writeFile(bad + "/renamed.json",
            R"j({"panels":[{"title":"t","targets":[{"refId":"A","expr":)j"
            R"j("sum by (mode) (rate(eq_worker_jobs_completed_total{mode=\"fast\"}[5m]))"}]}]})j");
  rc = run("python3 " + src + "/tests/monitoring/check_metric_names.py --dashboards " + bad + " " +
               files,
           &out);
  BOOST_TEST(rc == 1, out);
  BOOST_TEST(out.find("unknown metric eq_worker_jobs_completed_total") != std::string::npos, out);

  BOOST_TEST(stack.stopAll(), "every process exits with status 0 on SIGTERM");
}

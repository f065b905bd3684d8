#include "common/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/metrics_server.h"

using namespace eq::metrics;

namespace {

// One HTTP exchange on a fresh connection; returns everything the server
// sent before closing.
std::string exchange(int port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and close before reading it all
    sent += static_cast<size_t>(n);
  }
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

std::string body(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(metrics)

BOOST_AUTO_TEST_CASE(counters_and_gauges_render_in_registration_order) {
  Registry r;
  auto& jobs = r.counter("eq_jobs_total", "Jobs done.", {"mode", "outcome"});
  auto& up = r.gauge("eq_up", "1 when up.");
  jobs.with({"fast", "ok"}).inc();
  jobs.with({"fast", "ok"}).inc(2);
  jobs.with({"perfect", "failed"}).inc();
  up.get().set(1);
  BOOST_TEST(r.render() ==
             "# HELP eq_jobs_total Jobs done.\n"
             "# TYPE eq_jobs_total counter\n"
             "eq_jobs_total{mode=\"fast\",outcome=\"ok\"} 3\n"
             "eq_jobs_total{mode=\"perfect\",outcome=\"failed\"} 1\n"
             "# HELP eq_up 1 when up.\n"
             "# TYPE eq_up gauge\n"
             "eq_up 1\n");
}

BOOST_AUTO_TEST_CASE(unlabelled_series_exist_from_registration) {
  Registry r;
  r.counter("eq_reconnects_total", "Reconnects.");
  BOOST_TEST(r.render().find("\neq_reconnects_total 0\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(counters_ignore_negative_and_nan_increments) {
  Registry r;
  Counter& c = r.counter("eq_c_total", "c").get();
  c.inc(2.5);
  c.inc(-1);
  c.inc(std::nan(""));
  BOOST_TEST(c.value() == 2.5);
  BOOST_TEST(r.render().find("eq_c_total 2.5\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(label_values_and_help_are_escaped) {
  Registry r;
  auto& f = r.counter("eq_x_total", "Help with \\ backslash\nand newline \"quotes stay\".", {"v"});
  f.with({"a\"b\\c\nd"}).inc();
  std::string out = r.render();
  BOOST_TEST(out.find("# HELP eq_x_total Help with \\\\ backslash\\nand newline \"quotes "
                      "stay\".\n") != std::string::npos,
             out);
  BOOST_TEST(out.find("eq_x_total{v=\"a\\\"b\\\\c\\nd\"} 1\n") != std::string::npos, out);
  BOOST_TEST(escapeLabelValue("plain") == "plain");
  BOOST_TEST(escapeLabelValue("中文") == "中文");  // UTF-8 passes through
}

BOOST_AUTO_TEST_CASE(histogram_buckets_are_cumulative_with_inf_sum_and_count) {
  Registry r;
  auto& h = r.histogram("eq_d_seconds", "Durations.", {"mode"}, {0.1, 0.5, 1});
  Histogram& fast = h.with({"fast"});
  fast.observe(0.05);
  fast.observe(0.1);  // "le" is inclusive: counts in the 0.1 bucket
  fast.observe(0.3);
  fast.observe(2);
  fast.observe(std::nan(""));  // ignored
  BOOST_TEST(r.render() ==
             "# HELP eq_d_seconds Durations.\n"
             "# TYPE eq_d_seconds histogram\n"
             "eq_d_seconds_bucket{mode=\"fast\",le=\"0.1\"} 2\n"
             "eq_d_seconds_bucket{mode=\"fast\",le=\"0.5\"} 3\n"
             "eq_d_seconds_bucket{mode=\"fast\",le=\"1\"} 3\n"
             "eq_d_seconds_bucket{mode=\"fast\",le=\"+Inf\"} 4\n"
             "eq_d_seconds_sum{mode=\"fast\"} 2.45\n"
             "eq_d_seconds_count{mode=\"fast\"} 4\n");
}

BOOST_AUTO_TEST_CASE(unlabelled_histogram_renders_le_only) {
  Registry r;
  Histogram& h = r.histogram("eq_l_seconds", "l", {}, {1}).get();
  h.observe(5);
  std::string out = r.render();
  BOOST_TEST(out.find("eq_l_seconds_bucket{le=\"1\"} 0\n") != std::string::npos, out);
  BOOST_TEST(out.find("eq_l_seconds_bucket{le=\"+Inf\"} 1\n") != std::string::npos, out);
  BOOST_TEST(out.find("eq_l_seconds_sum 5\n") != std::string::npos, out);
  BOOST_TEST(out.find("eq_l_seconds_count 1\n") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(values_are_formatted_exactly) {
  BOOST_TEST(formatValue(0) == "0");
  BOOST_TEST(formatValue(42) == "42");
  BOOST_TEST(formatValue(-3) == "-3");
  BOOST_TEST(formatValue(0.1) == "0.1");
  BOOST_TEST(formatValue(0.005) == "0.005");
  BOOST_TEST(formatValue(1e300) == "1e+300");
  BOOST_TEST(formatValue(std::numeric_limits<double>::infinity()) == "+Inf");
  BOOST_TEST(formatValue(-std::numeric_limits<double>::infinity()) == "-Inf");
  BOOST_TEST(formatValue(std::nan("")) == "NaN");
}

BOOST_AUTO_TEST_CASE(names_are_validated) {
  BOOST_TEST(validMetricName("eq_worker_jobs_total"));
  BOOST_TEST(validMetricName("ns:rule_name"));
  BOOST_TEST(!validMetricName("1abc"));
  BOOST_TEST(!validMetricName("eq-worker"));
  BOOST_TEST(!validMetricName(""));
  BOOST_TEST(validLabelName("mode"));
  BOOST_TEST(!validLabelName("__name__"));
  BOOST_TEST(!validLabelName("a:b"));
}

BOOST_AUTO_TEST_CASE(concurrent_updates_are_not_lost) {
  Registry r;
  auto& c = r.counter("eq_n_total", "n", {"t"});
  Histogram& h = r.histogram("eq_h_seconds", "h", {}, {0.5}).get();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.with({"x"}).inc();
        h.observe(i % 2 == 0 ? 0.1 : 1.0);
      }
    });
  }
  std::string during = r.render();  // rendering meanwhile must be safe
  for (auto& t : threads) t.join();
  BOOST_TEST(c.with({"x"}).value() == 40000);
  Histogram::Snapshot s = h.snapshot();
  BOOST_TEST(s.count == 40000u);
  BOOST_TEST(s.cumulative.front() == 20000u);
  BOOST_TEST(s.cumulative.back() == 40000u);
}

BOOST_AUTO_TEST_CASE(server_serves_metrics_and_health) {
  Registry r;
  r.counter("eq_served_total", "s").get().inc(7);
  std::atomic<bool> broker{true};
  std::atomic<int> ticks{0};
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.health = [&] {
    return std::vector<HealthCheck>{{"broker", broker.load()}, {"database", true}};
  };
  o.on_tick = [&] { ++ticks; };
  o.tick_ms = 20;
  auto started = MetricsServer::start(r, o);
  BOOST_REQUIRE(started.isOk());
  auto server = std::move(started).value();
  BOOST_REQUIRE(server->port() > 0);

  std::string m = exchange(server->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  BOOST_TEST(m.rfind("HTTP/1.1 200 OK\r\n", 0) == 0, m);
  BOOST_TEST(m.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") !=
             std::string::npos);
  BOOST_TEST(body(m) == r.render());

  std::string h = exchange(server->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  BOOST_TEST(h.rfind("HTTP/1.1 200 OK\r\n", 0) == 0, h);
  BOOST_TEST(
      body(h) ==
      R"({"code":0,"data":{"status":"ok","checks":{"broker":"up","database":"up"}},"msg":"ok"})");
  broker = false;
  h = exchange(server->port(), "GET /healthz?verbose=1 HTTP/1.0\r\n\r\n");
  BOOST_TEST(h.rfind("HTTP/1.1 503 ", 0) == 0, h);
  BOOST_TEST(body(h) == R"({"code":503,"data":null,"msg":"unavailable: broker down"})");

  BOOST_TEST(exchange(server->port(), "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 404 ", 0) == 0);
  std::string post =
      exchange(server->port(), "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  BOOST_TEST(post.rfind("HTTP/1.1 405 ", 0) == 0, post);
  BOOST_TEST(post.find("Allow: GET\r\n") != std::string::npos);
  BOOST_TEST(exchange(server->port(), "NOT HTTP\r\n\r\n").rfind("HTTP/1.1 400 ", 0) == 0);
  std::string huge = "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(20000, 'a') + "\r\n\r\n";
  // The same HTTP server as eq-api's: an oversized head is a 431.
  BOOST_TEST(exchange(server->port(), huge).rfind("HTTP/1.1 431 ", 0) == 0);

  for (int i = 0; i < 100 && ticks.load() < 3; ++i) usleep(10000);
  BOOST_TEST(ticks.load() >= 3);  // on_tick runs periodically on the server thread
}

BOOST_AUTO_TEST_CASE(server_answers_a_client_that_half_closes_after_its_request) {
  // Probes such as `printf 'GET /healthz ...' | nc -N` shut down their
  // sending side right after the request; the answer must still arrive.
  Registry r;
  ServerOptions o;
  o.host = "127.0.0.1";
  auto started = MetricsServer::start(r, o);
  BOOST_REQUIRE(started.isOk());
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(started.value()->port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  BOOST_REQUIRE(::send(fd, req.data(), req.size(), MSG_NOSIGNAL) ==
                static_cast<ssize_t>(req.size()));
  ::shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  BOOST_TEST(out.rfind("HTTP/1.1 200 OK\r\n", 0) == 0, out);
  BOOST_TEST(body(out) == R"({"code":0,"data":{"status":"ok","checks":{}},"msg":"ok"})");
}

BOOST_AUTO_TEST_CASE(server_reports_a_port_in_use) {
  Registry r;
  ServerOptions o;
  o.host = "127.0.0.1";
  auto first = MetricsServer::start(r, o);
  BOOST_REQUIRE(first.isOk());
  o.port = first.value()->port();
  auto second = MetricsServer::start(r, o);
  BOOST_REQUIRE(!second.isOk());
  BOOST_TEST(second.status().msg().find("address already in use") != std::string::npos,
             second.status().msg());
}

BOOST_AUTO_TEST_CASE(metrics_port_comes_from_the_environment) {
  auto read = [](const char* v) {
    if (v != nullptr) setenv("EQ_METRICS_PORT", v, 1);
    eq::Result<eq::Config> c = eq::Config::fromEnv();
    unsetenv("EQ_METRICS_PORT");
    return c;
  };
  auto unset = read(nullptr);
  BOOST_REQUIRE(unset.isOk());
  BOOST_TEST(unset.value().metricsPort(9101) == 9101);  // the process's default
  BOOST_TEST(unset.value().metricsPort(9102) == 9102);
  BOOST_TEST(read("0").value().metricsPort(9101) == 0);
  BOOST_TEST(read("9200").value().metricsPort(9101) == 9200);
  BOOST_TEST(read("off").value().metricsPort(9101) == eq::Config::kMetricsOff);
  for (const char* bad : {"abc", "70000", "-1", "9101x", "OFF"}) {
    auto c = read(bad);
    BOOST_TEST(!c.isOk(), bad);
    if (!c.isOk()) BOOST_TEST(c.status().msg().find("EQ_METRICS_PORT") != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()

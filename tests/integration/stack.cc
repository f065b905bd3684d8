#include "tests/integration/stack.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "common/amqp.h"
#include "common/crypto.h"

extern char** environ;

namespace eq::it {
namespace {

std::string requireEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    BOOST_FAIL(std::string(name) +
               " is not set: run the integration tests through scripts/test, "
               "which starts RabbitMQ and sets it");
  }
  return v;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The header fields of a request head, names lower-cased (the request line
// is skipped, values lose leading spaces).
std::map<std::string, std::string> parseHeaders(const std::string& head) {
  std::map<std::string, std::string> out;
  std::istringstream lines(head);
  std::string line;
  std::getline(lines, line);  // request line
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    while (!v.empty() && v.front() == ' ') v.erase(0, 1);
    out[lower(line.substr(0, colon))] = v;
  }
  return out;
}

// Reads one request from a connection: the head, then Content-Length bytes
// of body, within timeout_ms and until `stop`. False when it did not arrive
// whole (then *w holds what did).
bool readRequest(int fd, int64_t timeout_ms, const std::atomic<bool>& stop, ReceivedWebhook* w) {
  std::string in;
  char buf[4096];
  size_t header_end = std::string::npos;
  size_t need = 0;
  int64_t until = nowMs() + timeout_ms;
  while (nowMs() < until && !stop) {
    pollfd q{fd, POLLIN, 0};
    if (::poll(&q, 1, 100) <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos) {
      header_end = in.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        std::string lowered = lower(in.substr(0, header_end));
        size_t cl = lowered.find("content-length:");
        need = cl == std::string::npos ? 0 : std::stoul(lowered.substr(cl + 15));
      }
    }
    if (header_end != std::string::npos && in.size() >= header_end + 4 + need) break;
  }
  if (header_end == std::string::npos) return false;
  w->headers = parseHeaders(in.substr(0, header_end));
  w->body = in.substr(header_end + 4, need);
  return in.size() >= header_end + 4 + need;
}

// OpenAPI check through prism (defined in the appended block at the end).
void checkThroughPrism(const std::string& method, const std::string& url,
                       const std::vector<std::string>& headers, const std::string& body,
                       HttpResult* r);
bool webhookMatchesOpenApi(const std::string& input_path, std::string* output);

size_t onBody(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

size_t onHeader(char* p, size_t size, size_t n, void* out) {
  std::string line(p, size * n);
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
    (*static_cast<std::map<std::string, std::string>*>(out))[lower(line.substr(0, colon))] = value;
  }
  return size * n;
}

}  // namespace

namespace {

// A listening socket on 127.0.0.1 with a free port (the receivers' common start).
int listenOnLoopback(int backlog, int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  BOOST_REQUIRE(::listen(fd, backlog) == 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

int64_t nowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

void waitForMinuteRoom(int64_t needed_ms) {
  using namespace std::chrono;
  const int64_t ms_in_minute =
      duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count() % 60'000;
  if (ms_in_minute > 60'000 - needed_ms) {
    std::this_thread::sleep_for(milliseconds(60'000 - ms_in_minute + 50));
  }
}

void sleepMs(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

Key createKey(Stack& stack, const std::string& name, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"key", "create", "--name", name, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  int rc = -1;
  std::string out = stack.eqctl(args, &rc);
  BOOST_REQUIRE_MESSAGE(rc == 0, "eqctl key create failed: " << out);
  rapidjson::Document d;
  d.Parse(out.c_str());
  BOOST_REQUIRE_MESSAGE(d.IsObject() && d.HasMember("key_id") && d.HasMember("api_key"),
                        "eqctl output is not the expected JSON: " << out);
  return Key{d["key_id"].GetString(), d["api_key"].GetString()};
}

HttpResult post(Stack& stack, const std::string& path, const std::string& body, const Key& key) {
  return httpRequest(
      "POST", stack.url(path),
      {"Authorization: Bearer " + key.api_key, "Content-Type: application/json; charset=utf-8"},
      body);
}

rapidjson::Document parse(const HttpResult& r) {
  rapidjson::Document d;
  d.Parse(r.body.c_str());
  BOOST_REQUIRE_MESSAGE(
      d.IsObject() && d.HasMember("code") && d.HasMember("data") && d.HasMember("msg"),
      "not an envelope (status " << r.status << "): " << r.body);
  return d;
}

int64_t quotaOf(Stack& stack, const Key& key, const std::string& mode) {
  HttpResult r = get(stack, "/api/v1/quota", &key);
  BOOST_REQUIRE_MESSAGE(r.status == 200, "quota: " << r.status << " " << r.body);
  return parse(r)["data"]["quota"][mode.c_str()].GetInt64();
}

std::string taskIdOf(const HttpResult& r) {
  if (r.status != 200) return "";
  rapidjson::Document d;
  d.Parse(r.body.c_str());
  if (!d.IsObject() || !d.HasMember("data") || !d["data"].IsObject() ||
      !d["data"].HasMember("task_id") || !d["data"]["task_id"].IsString()) {
    return "";
  }
  return d["data"]["task_id"].GetString();
}

int64_t queryInt(const Stack& stack, const std::string& sql) {
  int64_t v = -1;
  auto r = stack.db().exec(store::Sql{sql}, {}, [&](const store::Row& row) {
    v = row.int64(0);
    row.stop();
  });
  BOOST_REQUIRE_MESSAGE(r.isOk(), sql << ": " << r.status().msg());
  return v;
}

std::vector<std::string> queryTexts(const Stack& stack, const std::string& sql) {
  std::vector<std::string> out;
  auto r = stack.db().exec(store::Sql{sql}, {},
                           [&](const store::Row& row) { out.emplace_back(row.text(0)); });
  BOOST_REQUIRE_MESSAGE(r.isOk(), sql << ": " << r.status().msg());
  return out;
}

HttpResult get(Stack& stack, const std::string& path, const Key* key) {
  std::vector<std::string> headers;
  if (key != nullptr) headers.push_back("Authorization: Bearer " + key->api_key);
  return httpRequest("GET", stack.url(path), headers);
}

HttpResult httpRequest(const std::string& method, const std::string& url,
                       const std::vector<std::string>& headers, const std::string& body) {
  HttpResult r;
  CURL* c = curl_easy_init();
  struct curl_slist* hs = nullptr;
  for (const std::string& h : headers) hs = curl_slist_append(hs, h.c_str());
  hs = curl_slist_append(hs, "Expect:");
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "POST" || !body.empty()) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, onBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, onHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(hs);
  curl_easy_cleanup(c);
  checkThroughPrism(method, url, headers, body, &r);
  return r;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int refusingPort(int* fd) {
  *fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(*fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

int connectTo(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string rawExchange(int port, const std::string& bytes, int timeout_ms) {
  int fd = connectTo(port);
  BOOST_REQUIRE_MESSAGE(fd >= 0, "cannot connect to port " << port);
  std::string_view part(bytes);
  while (!part.empty()) {
    // The server may stop reading early; a failed send is part of some tests.
    ssize_t n = ::send(fd, part.data(), part.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    part.remove_prefix(static_cast<size_t>(n));
  }
  std::string out;
  char buf[4096];
  int64_t until = nowMs() + timeout_ms;
  while (nowMs() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

int brokerCtl(const std::string& args) {
  std::string src = requireEnv("EQ_SOURCE_DIR");
  std::string dir = requireEnv("EQ_TEST_BROKER_DIR");
  std::string cmd = "bash -c 'source \"" + src + "/scripts/lib/broker.sh\" && eq_broker_ctl \"" +
                    dir + "\" " + args + "' >/dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int postgresCtl(const std::string& action) {
  BOOST_REQUIRE(action == "stop" || action == "start");
  std::string src = requireEnv("EQ_SOURCE_DIR");
  std::string dir = requireEnv("EQ_TEST_PG_DIR");
  std::string cmd = "bash -c 'source \"" + src + "/scripts/lib/postgres.sh\" && eq_postgres_" +
                    action + " \"" + dir + "\"' >/dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// -------------------------------------------------------------- DbWriteLock

DbWriteLock::DbWriteLock(const Stack& stack) : db_(stack.openDb()) {
  db_->setBusyTimeout(5000);
  Status begun = db_->begin();
  BOOST_REQUIRE_MESSAGE(begun.isOk(), "BEGIN failed: " << begun.msg());
  // On SQLite BEGIN (IMMEDIATE) took the write lock. On PostgreSQL the key
  // epoch, which every authenticated batch and /readyz read first, is
  // locked against reads too, and the tables eq-api writes against writes
  // (reads go on, as on SQLite).
  for (const store::Sql& lock :
       {store::Sql{"SELECT 1", "LOCK TABLE key_epoch IN ACCESS EXCLUSIVE MODE"},
        store::Sql{"SELECT 1",
                   "LOCK TABLE rate_counters, accounts, api_keys, idempotency_keys, "
                   "open_charges, tasks, usage_hourly IN EXCLUSIVE MODE"}}) {
    auto locked = db_->exec(lock);
    BOOST_REQUIRE_MESSAGE(locked.isOk(), "lock: " << locked.status().msg());
  }
}

void DbWriteLock::release() {
  if (db_ == nullptr) return;
  db_->rollback();
  db_.reset();
}

// ------------------------------------------------------------------ Process

Process::Process(const std::string& name, const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env, const std::string& log_path)
    : name_(name), log_path_(log_path) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);

  pid_ = fork();
  BOOST_REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args, envp;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
}

Process::~Process() {
  if (pid_ > 0) terminate(5000);
}

int Process::terminate(int timeout_ms) {
  if (pid_ <= 0) return 0;
  ::kill(pid_, SIGTERM);
  int64_t until = nowMs() + timeout_ms;
  int status = 0;
  while (nowMs() < until) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    usleep(20000);
  }
  BOOST_TEST_MESSAGE(name_ << " did not stop within " << timeout_ms << " ms; killing");
  kill9();
  return -1;
}

int Process::wait(int timeout_ms) {
  int64_t until = nowMs() + timeout_ms;
  int status = 0;
  while (pid_ > 0 && nowMs() < until) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    usleep(10000);
  }
  kill9();
  return -1;
}

void Process::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string Process::waitForLog(const std::string& needle, int timeout_ms) {
  int64_t until = nowMs() + timeout_ms;
  while (nowMs() < until) {
    std::ifstream in(log_path_);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find(needle) != std::string::npos) return line;
    }
    usleep(50000);
  }
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  BOOST_FAIL(name_ << " never logged '" << needle << "'; its log:\n" << ss.str());
  return "";
}

// ------------------------------------------------------------ WebhookReceiver

WebhookReceiver::WebhookReceiver() {
  listen_fd_ = listenOnLoopback(64, &port_);
  thread_ = std::thread([this] { run(); });
}

WebhookReceiver::~WebhookReceiver() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

void WebhookReceiver::run() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    ReceivedWebhook w;
    readRequest(fd, 5000, stop_, &w);  // an incomplete request is recorded as it came
    const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    ssize_t ignored = ::write(fd, reply, sizeof reply - 1);
    (void)ignored;
    ::close(fd);
    {
      std::lock_guard<std::mutex> lock(mu_);
      got_.push_back(std::move(w));
    }
    cv_.notify_all();
  }
}

bool WebhookReceiver::waitFor(size_t n, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return got_.size() >= n; });
}

std::vector<ReceivedWebhook> WebhookReceiver::received() {
  std::lock_guard<std::mutex> lock(mu_);
  return got_;
}

// ------------------------------------------------------------------ Stack

Stack::Stack(StackOptions opts) {
  std::string amqp_port = requireEnv("EQ_TEST_AMQP_PORT");
  std::string mgmt_port = requireEnv("EQ_TEST_MGMT_PORT");
  std::string user = std::getenv("EQ_TEST_AMQP_USER") ? std::getenv("EQ_TEST_AMQP_USER") : "eq";
  std::string pass =
      std::getenv("EQ_TEST_AMQP_PASSWORD") ? std::getenv("EQ_TEST_AMQP_PASSWORD") : "eq";
  bin_ = requireEnv("EQ_BIN_DIR");

  char tmpl[] = "/tmp/eq-it-XXXXXX";
  dir_ = mkdtemp(tmpl);
  // A vhost of our own: queues of other test runs on the same broker never
  // mix with ours, and deleting it at the end removes everything we made.
  vhost_ = "eq-it-" + std::to_string(getpid()) + "-" + dir_.substr(dir_.size() - 6);
  mgmt_ = "http://127.0.0.1:" + mgmt_port;
  std::string auth = "Authorization: Basic ";
  {
    // Basic auth header by hand keeps the helper free of curl options.
    std::string raw = user + ":" + pass;
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b64;
    int val = 0, bits = -6;
    for (unsigned char c : raw) {
      val = (val << 8) + c;
      bits += 8;
      while (bits >= 0) {
        b64.push_back(k[(val >> bits) & 0x3F]);
        bits -= 6;
      }
    }
    if (bits > -6) b64.push_back(k[((val << 8) >> (bits + 8)) & 0x3F]);
    while (b64.size() % 4) b64.push_back('=');
    auth += b64;
  }
  env_["EQ_MGMT_AUTH"] = auth;  // kept for the destructor
  HttpResult v = httpRequest("PUT", mgmt_ + "/api/vhosts/" + vhost_,
                             {auth, "Content-Type: application/json"}, "{}");
  BOOST_REQUIRE_MESSAGE(v.status == 201 || v.status == 204, "create vhost: " << v.status << v.body);
  HttpResult p = httpRequest("PUT", mgmt_ + "/api/permissions/" + vhost_ + "/" + user,
                             {auth, "Content-Type: application/json"},
                             R"({"configure":".*","write":".*","read":".*"})");
  BOOST_REQUIRE_MESSAGE(p.status == 201 || p.status == 204, "permissions: " << p.status);

  env_["EQ_AMQP_URL"] = "amqp://" + user + ":" + pass + "@127.0.0.1:" + amqp_port + "/" + vhost_;
  grantRoles(auth, amqp_port);
  if (opts.env.count("EQ_DB_URL") == 0) placeStore();
  env_["EQ_HTTP_PORT"] = "0";
  env_["EQ_HTTP_HOST"] = "127.0.0.1";
  env_["EQ_ENV"] = "production";
  // A fresh key per stack, as scripts/run makes one per var dir: the
  // processes refuse to start without one, and no two stacks share it.
  env_["EQ_INTERNAL_KEY"] = eq::crypto::hex(eq::crypto::randomBytes(32));
  env_["EQ_WEBHOOK_ALLOW_CIDRS"] = "127.0.0.1/32";
  env_["EQ_LOG_LEVEL"] = "info";
  // Workers and the dispatcher serve /metrics on a free port each (logged
  // as "metrics listening"): the fixed defaults would collide.
  env_["EQ_METRICS_PORT"] = "0";
  env_["EQ_METRICS_HOST"] = "127.0.0.1";
  for (const auto& [k, v] : opts.env) env_[k] = v;

  auto start = [&](const std::string& name, std::vector<std::string> argv,
                   const std::map<std::string, std::string>& extra = {}) {
    std::map<std::string, std::string> env = env_;
    for (const auto& [k, v] : extra) env[k] = v;
    procs_.push_back(std::make_unique<Process>(name, argv, env, dir_ + "/" + name + ".log"));
    by_name_[name] = procs_.back().get();
    return procs_.back().get();
  };
  for (int i = 0; i < opts.api_processes; ++i) {
    std::map<std::string, std::string> extra;
    if (opts.shared_port && i > 0) extra["EQ_HTTP_PORT"] = std::to_string(api_ports_.at(0));
    api_hosts_.push_back(static_cast<size_t>(i) < opts.api_hosts.size()
                             ? opts.api_hosts[static_cast<size_t>(i)]
                             : "127.0.0.1");
    extra["EQ_HTTP_HOST"] = api_hosts_.back();
    extra["EQ_AMQP_URL"] = roleUrl("eq-api");
    Process* api = start("api-" + std::to_string(i), {bin_ + "/eq-api"}, extra);
    std::string line = api->waitForLog("\"msg\":\"listening\"", 10000);
    // The engine asked for is the one the process runs on.
    api->waitForLog(onPostgres() ? "\"database\":\"postgresql://" : "\"database\":\"sqlite:", 1000);
    size_t at = line.find("\"port\":");
    api_ports_.push_back(std::stoi(line.substr(at + 7)));
  }
  std::vector<Process*> consumers;
  for (const std::string& mode : opts.worker_modes) {
    std::vector<std::string> argv = {bin_ + "/eq-worker", "--mode", mode};
    if (mode == "fast") argv.push_back("--analyze");
    consumers.push_back(start("worker-" + mode, argv, {{"EQ_AMQP_URL", roleUrl("eq-worker")}}));
  }
  if (opts.dispatcher) {
    consumers.push_back(start("dispatcher", {bin_ + "/eq-dispatcher"},
                              {{"EQ_AMQP_URL", roleUrl("eq-dispatcher")}}));
  }
  for (Process* p : consumers) p->waitForLog("consuming", 20000);

  for (int i = 0; i < opts.api_processes; ++i) {
    int64_t until = nowMs() + 20000;
    while (nowMs() < until && httpRequest("GET", url("/readyz", i)).status != 200) usleep(100000);
    BOOST_REQUIRE_MESSAGE(httpRequest("GET", url("/readyz", i)).status == 200,
                          "api " << i << " never got ready");
  }
  startPrism();
}

// (A test that places the database itself, on a small file system say,
// gives EQ_DB_URL in StackOptions::env.)
void Stack::placeStore() {
  const char* engine = std::getenv("EQ_TEST_STORE");
  if (engine == nullptr || std::string(engine) != "postgres") {
    env_["EQ_DB_URL"] = "sqlite:" + dir_ + "/eq.db";
    return;
  }
  const std::string server = requireEnv("EQ_TEST_PG_URL");
  // Named after the vhost, which is unique to this process and stack.
  pg_schema_ = "it_" + std::to_string(getpid()) + "_" + dir_.substr(dir_.size() - 6);
  for (char& c : pg_schema_)
    c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '_';
  auto admin = store::Db::open(store::DbUrl::parse(server).value());
  BOOST_REQUIRE_MESSAGE(admin.isOk(), "EQ_TEST_PG_URL: " << admin.status().msg());
  Status made = admin.value()->script("CREATE SCHEMA " + pg_schema_);
  BOOST_REQUIRE_MESSAGE(made.isOk(), "create schema: " << made.msg());
  // Every connection of the stack's processes finds its tables there
  // (libpq's `options`, percent-encoded: -c search_path=SCHEMA).
  env_["EQ_DB_URL"] = server + (server.find('?') == std::string::npos ? "?" : "&") +
                      "options=-csearch_path%3D" + pg_schema_;
}

std::unique_ptr<store::Db> Stack::openDb() const {
  auto url = store::DbUrl::parse(dbUrl());
  BOOST_REQUIRE_MESSAGE(url.isOk(), url.status().msg());
  auto db = store::Db::open(url.value());
  BOOST_REQUIRE_MESSAGE(db.isOk(), "open " << url.value().redacted() << ": " << db.status().msg());
  return std::move(db).value();
}

store::Db& Stack::db() const {
  if (db_ == nullptr) {
    db_ = openDb();
    db_->setBusyTimeout(5000);
  }
  return *db_;
}

std::string Stack::dbPath() const {
  BOOST_REQUIRE_MESSAGE(!onPostgres(), "this test reads the SQLite file itself: SQLite only");
  return dbUrl().substr(std::string("sqlite:").size());
}

Process* Stack::process(const std::string& name) {
  auto it = by_name_.find(name);
  BOOST_REQUIRE_MESSAGE(it != by_name_.end(), "no process " << name);
  return it->second;
}

Stack::~Stack() {
  stopAll();
  httpRequest("DELETE", mgmt_ + "/api/vhosts/" + vhost_, {env_["EQ_MGMT_AUTH"]});
  if (!pg_schema_.empty() && std::getenv("EQ_TEST_KEEP") == nullptr) {
    db_.reset();
    if (auto admin = store::Db::open(store::DbUrl::parse(requireEnv("EQ_TEST_PG_URL")).value());
        admin.isOk()) {
      (void)admin.value()->script("DROP SCHEMA " + pg_schema_ + " CASCADE");
    }
  }
  if (std::getenv("EQ_TEST_KEEP") == nullptr) {
    std::string cmd = "rm -rf '" + dir_ + "'";
    int ignored = std::system(cmd.c_str());
    (void)ignored;
  }
}

std::string Stack::url(const std::string& path, int api) const {
  const std::vector<int>& ports = prism_ports_.empty() ? api_ports_ : prism_ports_;
  const std::string host =
      prism_ports_.empty() ? api_hosts_.at(static_cast<size_t>(api)) : std::string("127.0.0.1");
  return "http://" + host + ":" + std::to_string(ports.at(static_cast<size_t>(api))) + path;
}

std::string Stack::eqctl(const std::vector<std::string>& args, int* exit_code,
                         const std::map<std::string, std::string>& env) {
  std::string out_path = dir_ + "/eqctl.out";
  std::vector<std::string> argv = {bin_ + "/eqctl"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::map<std::string, std::string> merged = env_;
  for (const auto& [k, v] : env) merged[k] = v;
  {
    Process p("eqctl", argv, merged, out_path + ".log");
    int rc = p.wait(10000);
    if (exit_code != nullptr) *exit_code = rc;
  }
  std::ifstream in(out_path + ".log");
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove((out_path + ".log").c_str());
  return ss.str();
}

bool Stack::stopAll() {
  stopPrism();  // not counted in `clean`: node ends by the signal, not with 0
  bool clean = true;
  // Api first (stop accepting), then workers and dispatcher.
  for (auto& p : procs_) {
    int rc = p->terminate();
    if (rc != 0) {
      BOOST_TEST_MESSAGE("process exited with " << rc << "; log: " << p->logPath());
      clean = false;
    }
  }
  procs_.clear();
  by_name_.clear();
  return clean;
}

}  // namespace eq::it

// ------------------------------------------- appended: spawn, management API

namespace eq::it {

Process* Stack::spawn(const std::string& name, const std::vector<std::string>& args,
                      const std::map<std::string, std::string>& env) {
  BOOST_REQUIRE(!args.empty());
  std::map<std::string, std::string> merged = env_;
  if (role_urls_.count(args[0]) != 0) merged["EQ_AMQP_URL"] = role_urls_.at(args[0]);
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> argv = args;
  argv[0] = bin_ + "/" + argv[0];
  procs_.push_back(std::make_unique<Process>(name, argv, merged, dir_ + "/" + name + ".log"));
  by_name_[name] = procs_.back().get();
  return procs_.back().get();
}

void Stack::grantRoles(const std::string& auth, const std::string& amqp_port) {
  // The topology, declared by the administrator as scripts/lib/broker.sh
  // does for vhost "/": the role users may only check that it exists.
  {
    Result<std::unique_ptr<eq::amqp::Connection>> admin =
        eq::amqp::Connection::open(amqpUrl(), "eq-it topology", 10);
    BOOST_REQUIRE_MESSAGE(admin.isOk(), "admin connection: " << admin.status().msg());
    Status s = admin.value()->declareTopology();
    BOOST_REQUIRE_MESSAGE(s.isOk(), "declare topology: " << s.msg());
  }
  // The users are the broker's (scripts/test passes their passwords); their
  // permissions in our vhost are copied from those deploy/rabbitmq/
  // definitions.sh gave them in "/", so the tests run with what ships.
  for (const char* role : {"api", "worker", "dispatcher"}) {
    std::string user = std::string("eq-") + role;
    std::string var = "EQ_TEST_AMQP_" + std::string(role) + "_PASSWORD";
    for (char& c : var) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::string pass = requireEnv(var.c_str());
    HttpResult got = httpRequest("GET", mgmt_ + "/api/permissions/%2F/" + user, {auth});
    BOOST_REQUIRE_MESSAGE(got.status == 200, "permissions of " << user << " in /: " << got.status);
    rapidjson::Document d;
    d.Parse(got.body.c_str());
    BOOST_REQUIRE(d.IsObject() && d.HasMember("configure") && d.HasMember("write") &&
                  d.HasMember("read"));
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> j(sb);
    j.StartObject();
    for (const char* k : {"configure", "write", "read"}) {
      j.Key(k);
      j.String(d[k].GetString(), d[k].GetStringLength());
    }
    j.EndObject();
    HttpResult put = httpRequest("PUT", mgmt_ + "/api/permissions/" + vhost_ + "/" + user,
                                 {auth, "Content-Type: application/json"}, sb.GetString());
    BOOST_REQUIRE_MESSAGE(put.status == 201 || put.status == 204,
                          "permissions of " << user << ": " << put.status);
    role_urls_[user] = "amqp://" + user + ":" + pass + "@127.0.0.1:" + amqp_port + "/" + vhost_;
  }
}

const std::string& Stack::roleUrl(const std::string& binary) const {
  auto it = role_urls_.find(binary);
  BOOST_REQUIRE_MESSAGE(it != role_urls_.end(), "no broker user for " << binary);
  return it->second;
}

HttpResult Stack::management(const std::string& path, const std::string& method,
                             const std::string& json_body) {
  std::string p = path;
  if (size_t at = p.find("{vhost}"); at != std::string::npos) p.replace(at, 7, vhost_);
  std::vector<std::string> headers = {env_.at("EQ_MGMT_AUTH")};
  if (!json_body.empty()) headers.emplace_back("Content-Type: application/json");
  return httpRequest(method, mgmt_ + "/api" + p, headers, json_body);
}

// ------------------------------------------------------ TaskWebhookReceiver

TaskWebhookReceiver::TaskWebhookReceiver(int delay_ms) : delay_ms_(delay_ms) {
  listen_fd_ = listenOnLoopback(256, &port_);
  thread_ = std::thread([this] { run(); });
}

TaskWebhookReceiver::~TaskWebhookReceiver() {
  stop_ = true;
  thread_.join();
  for (std::thread& t : handlers_) t.join();
  ::close(listen_fd_);
}

std::string TaskWebhookReceiver::url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/hook";
}

void TaskWebhookReceiver::run() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // Only this thread touches handlers_ until the destructor joins it.
    handlers_.emplace_back([this, fd] { serve(fd); });
  }
}

void TaskWebhookReceiver::serve(int fd) {
  ReceivedWebhook w;
  if (!readRequest(fd, 10000, stop_, &w)) {
    ::close(fd);
    return;
  }
  const std::string& body = w.body;
  std::string task_id;
  const std::string marker = "\"task_id\":\"";
  if (size_t at = body.find(marker); at != std::string::npos) {
    size_t from = at + marker.size();
    task_id = body.substr(from, body.find('"', from) - from);
  }
  {
    // Counted on arrival: the receiver has seen it even if the sender dies
    // before the answer below.
    std::lock_guard<std::mutex> lock(mu_);
    ++by_task_[task_id];
    ++total_;
  }
  cv_.notify_all();
  for (int slept = 0; slept < delay_ms_ && !stop_; slept += 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  // MSG_NOSIGNAL: a sender killed while we waited must not SIGPIPE the test.
  ssize_t ignored = ::send(fd, reply, sizeof reply - 1, MSG_NOSIGNAL);
  (void)ignored;
  ::close(fd);
}

size_t TaskWebhookReceiver::total() {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

std::map<std::string, int> TaskWebhookReceiver::countsByTask() {
  std::lock_guard<std::mutex> lock(mu_);
  return by_task_;
}

bool TaskWebhookReceiver::waitForTotal(size_t n, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return total_ >= n; });
}

bool TaskWebhookReceiver::waitForAll(const std::vector<std::string>& ids, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    for (const std::string& id : ids) {
      if (by_task_.count(id) == 0) return false;
    }
    return true;
  });
}

}  // namespace eq::it

// ------------------------------------ appended: scripted receiver, verifiers

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace eq::it {
namespace {

// Reads what is available into *in, waiting in short polls; false when the
// peer closed, on error, or when `stop` is set.
bool readSome(int fd, std::string* in, const std::atomic<bool>& stop) {
  char buf[8192];
  while (!stop) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    in->append(buf, static_cast<size_t>(n));
    return true;
  }
  return false;
}

}  // namespace

HookServer::HookServer(ReplyFn reply) : reply_(std::move(reply)) {
  listen_fd_ = listenOnLoopback(128, &port_);
  thread_ = std::thread([this] { run(); });
}

HookServer::~HookServer() {
  stop_ = true;
  thread_.join();
  for (std::thread& t : handlers_) t.join();
  ::close(listen_fd_);
}

std::string HookServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

void HookServer::setReply(ReplyFn reply) {
  std::lock_guard<std::mutex> lock(mu_);
  reply_ = std::move(reply);
}

void HookServer::run() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int connection;
    {
      std::lock_guard<std::mutex> lock(mu_);
      connection = ++connections_;
    }
    handlers_.emplace_back([this, fd, connection] { serve(fd, connection); });
  }
}

void HookServer::serve(int fd, int connection) {
  std::string in;
  while (!stop_) {
    size_t header_end;
    while ((header_end = in.find("\r\n\r\n")) == std::string::npos) {
      if (!readSome(fd, &in, stop_)) {
        ::close(fd);
        return;
      }
    }
    ReceivedWebhook w;
    w.headers = parseHeaders(in.substr(0, header_end));
    auto cl = w.headers.find("content-length");
    size_t need = cl == w.headers.end() ? 0 : std::stoul(cl->second);
    while (in.size() < header_end + 4 + need) {
      if (!readSome(fd, &in, stop_)) {
        ::close(fd);
        return;
      }
    }
    w.body = in.substr(header_end + 4, need);
    in.erase(0, header_end + 4 + need);

    ReplyFn reply;
    size_t n;
    {
      std::lock_guard<std::mutex> lock(mu_);
      got_.push_back(HookRequest{w, nowMs(), connection});
      n = got_.size();
      reply = reply_;
    }
    cv_.notify_all();
    HookReply r = reply ? reply(w, n) : HookReply{};
    if (r.hang) {
      // Never answer: wait for the client to give up (it closes) or the end.
      std::string ignored;
      while (readSome(fd, &ignored, stop_)) ignored.clear();
      break;
    }
    std::string out = "HTTP/1.1 " + std::to_string(r.status) +
                      " Scripted\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n";
    if (!r.body.empty()) out += "Content-Type: application/json\r\n";
    for (const std::string& h : r.headers) out += h + "\r\n";
    out += "\r\n" + r.body;
    if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
      break;
    }
  }
  ::close(fd);
}

bool HookServer::waitFor(size_t n, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return got_.size() >= n; });
}

std::vector<HookRequest> HookServer::received() {
  std::lock_guard<std::mutex> lock(mu_);
  return got_;
}

int HookServer::connections() {
  std::lock_guard<std::mutex> lock(mu_);
  return connections_;
}

bool verifyWithNpm(const std::string& secret, const ReceivedWebhook& w, std::string* output,
                   bool against_openapi) {
  std::string src = requireEnv("EQ_SOURCE_DIR");
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> j(sb);
  j.StartObject();
  j.Key("secret");
  j.String(secret.c_str(), static_cast<rapidjson::SizeType>(secret.size()));
  j.Key("headers");
  j.StartObject();
  for (const auto& [k, v] : w.headers) {
    j.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
    j.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
  }
  j.EndObject();
  j.Key("body");
  j.String(w.body.c_str(), static_cast<rapidjson::SizeType>(w.body.size()));
  j.EndObject();

  char in_tmpl[] = "/tmp/eq-verify-XXXXXX";
  int fd = mkstemp(in_tmpl);
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE(::write(fd, sb.GetString(), sb.GetSize()) == static_cast<ssize_t>(sb.GetSize()));
  ::close(fd);
  std::string in_path = in_tmpl, out_path = in_path + ".out";
  std::string cmd = "node '" + src + "/tests/webhook-verify/verify.js' < '" + in_path + "' > '" +
                    out_path + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream out(out_path);
  std::stringstream ss;
  ss << out.rdbuf();
  if (output != nullptr) *output = ss.str();
  bool ok = WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
  // The OpenAPI run also holds the webhook against the document's callback.
  if (against_openapi || prismEnabled()) ok = webhookMatchesOpenApi(in_path, output) && ok;
  std::remove(in_path.c_str());
  std::remove(out_path.c_str());
  return ok;
}

}  // namespace eq::it

// ------------------------------------ appended: OpenAPI check through prism

namespace eq::it {
namespace {

// Which prism proxy (by port) fronts which eq-api (by port). Written by the
// main thread when a Stack starts or stops prism, read by every request.
std::mutex g_prism_mu;
std::map<int, int> g_prism_upstream;
// Failures found on other threads, reported by the main thread later
// (Boost.Test assertions are only safe on the main thread).
std::vector<std::string> g_prism_pending;
// Static initialisation runs on the main thread.
const std::thread::id g_main_thread = std::this_thread::get_id();

constexpr std::string_view kLoopback = "http://127.0.0.1:";

int portOf(const std::string& url) {
  if (url.compare(0, kLoopback.size(), kLoopback) != 0) return 0;
  return std::atoi(url.c_str() + kLoopback.size());
}

void flushPrismFailures() {
  if (std::this_thread::get_id() != g_main_thread) return;
  std::vector<std::string> pending;
  {
    std::lock_guard<std::mutex> lock(g_prism_mu);
    pending.swap(g_prism_pending);
  }
  for (const std::string& what : pending) BOOST_ERROR(what);
}

void reportPrismFailure(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(g_prism_mu);
    g_prism_pending.push_back(what);
  }
  flushPrismFailures();
}

// The response violations in prism's `sl-violations` header (a JSON array
// of {location, severity, code, message}; location[0] is "request" or
// "response"). Request violations are not listed: for those prism answers
// itself and the caller handles that. An unparsable header (prism cuts it
// at 8 KiB as "Too many violations! ...") counts as a violation.
std::string responseViolations(const std::string& header) {
  rapidjson::Document d;
  d.Parse(header.c_str());
  if (!d.IsArray()) return header;
  std::string out;
  for (const auto& v : d.GetArray()) {
    if (!v.IsObject() || !v.HasMember("location") || !v["location"].IsArray()) continue;
    const auto& loc = v["location"];
    if (loc.Empty() || !loc[0u].IsString() || std::string(loc[0u].GetString()) != "response") {
      continue;
    }
    std::string where;
    for (const auto& part : loc.GetArray()) {
      if (part.IsString()) where += (where.empty() ? "" : ".") + std::string(part.GetString());
    }
    out += "\n  [" + std::string(v.HasMember("severity") ? v["severity"].GetString() : "?") + "] " +
           where + ": " + (v.HasMember("message") ? v["message"].GetString() : "");
  }
  return out;
}

void checkThroughPrism(const std::string& method, const std::string& url,
                       const std::vector<std::string>& headers, const std::string& body,
                       HttpResult* r) {
  flushPrismFailures();
  int upstream = 0;
  {
    std::lock_guard<std::mutex> lock(g_prism_mu);
    auto it = g_prism_upstream.find(portOf(url));
    if (it != g_prism_upstream.end()) upstream = it->second;
  }
  if (upstream == 0) return;  // not a request through prism
  std::string path = url.substr(url.find('/', kLoopback.size()));
  std::string what = method + " " + path;

  if (r->status == 0) {
    reportPrismFailure("prism did not answer " + what);
    return;
  }
  auto v = r->headers.find("sl-violations");
  std::string violations = v == r->headers.end() ? "" : responseViolations(v->second);
  bool problem = r->headers["content-type"].rfind("application/problem+json", 0) == 0;
  if (violations.empty() && problem &&
      r->body.find("prism/errors#VIOLATIONS") != std::string::npos) {
    violations = "\n  " + r->body;
  }
  if (!violations.empty()) {
    reportPrismFailure("schema/openapi.yaml: the response to " + what + " (status " +
                       std::to_string(r->status) + ") breaks the document (prism):" + violations);
    return;
  }
  // Every answer of eq-api carries X-Request-Id; one without it is prism's
  // (problem+json) or its HTTP layer's (400 for a body that is not JSON):
  // the document refuses the request.
  if (r->headers.count("x-request-id") != 0) return;
  HttpResult refused = *r;
  std::string direct = std::string(kLoopback) + std::to_string(upstream) + path;
  *r = httpRequest(method, direct, headers, body);
  if (r->status < 400 || r->status >= 500) {
    reportPrismFailure("schema/openapi.yaml refuses " + what +
                       " (prism: " + std::to_string(refused.status) + " " + refused.body +
                       ") but eq-api answered it with " + std::to_string(r->status) + ": " +
                       r->body);
  }
}

// tests/openapi/check-webhook.js (ajv) on the verifier's input file:
// {headers, body} against the taskFinished callback of schema/openapi.yaml.
// Its report is appended to *output.
bool webhookMatchesOpenApi(const std::string& input_path, std::string* output) {
  std::string src = requireEnv("EQ_SOURCE_DIR");
  std::string out_path = input_path + ".openapi";
  std::string cmd = "node '" + src + "/tests/openapi/check-webhook.js' < '" + input_path + "' > '" +
                    out_path + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream out(out_path);
  std::stringstream ss;
  ss << out.rdbuf();
  if (output != nullptr) *output += ss.str();
  std::remove(out_path.c_str());
  return WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

}  // namespace

bool prismEnabled() {
  const char* v = std::getenv("EQ_TEST_PRISM");
  return v != nullptr && std::string(v) == "1";
}

void Stack::startPrism() {
  if (!prismEnabled()) return;
  std::string src = requireEnv("EQ_SOURCE_DIR");
  std::string prism = src + "/tests/openapi/node_modules/.bin/prism";
  BOOST_REQUIRE_MESSAGE(::access(prism.c_str(), X_OK) == 0,
                        prism << " is missing: scripts/test installs it (npm, tests/openapi)");
  // All proxies start at once, then we wait for each (node needs a few
  // seconds to load prism and the document).
  int64_t started = nowMs();
  for (size_t i = 0; i < api_ports_.size(); ++i) {
    std::string name = "prism-" + std::to_string(i);
    prism_.push_back(std::make_unique<Process>(
        name,
        std::vector<std::string>{prism, "proxy", src + "/schema/openapi.yaml",
                                 "http://127.0.0.1:" + std::to_string(api_ports_[i]), "--errors",
                                 "--port", "0", "--host", "127.0.0.1", "--no-cors"},
        env_, dir_ + "/" + name + ".log"));
  }
  const std::string listening = "Prism is listening on " + std::string(kLoopback);
  for (size_t i = 0; i < prism_.size(); ++i) {
    std::string line = prism_[i]->waitForLog(listening, 60000);
    int port = std::atoi(line.c_str() + line.find(listening) + listening.size());
    BOOST_REQUIRE_MESSAGE(port > 0, "no port in prism's line: " << line);
    prism_ports_.push_back(port);
    std::lock_guard<std::mutex> lock(g_prism_mu);
    g_prism_upstream[port] = api_ports_[i];
  }
  BOOST_TEST_MESSAGE(prism_.size() << " prism proxies (schema/openapi.yaml, --errors) ready in "
                                   << nowMs() - started << " ms; logs in " << dir_);
}

void Stack::stopPrism() {
  {
    std::lock_guard<std::mutex> lock(g_prism_mu);
    for (int port : prism_ports_) g_prism_upstream.erase(port);
  }
  prism_ports_.clear();
  for (auto& p : prism_) p->terminate(5000);
  prism_.clear();
  flushPrismFailures();
}

}  // namespace eq::it

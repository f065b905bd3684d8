// Test harness for the integration tests: runs the real binaries against the
// RabbitMQ that scripts/test started, on a private vhost per test run and a
// fresh store, with eq-api on a free port. The store is a SQLite file, or
// with EQ_TEST_STORE=postgres a schema of its own on the PostgreSQL server
// of scripts/test (EQ_TEST_PG_URL), dropped with the stack. Also an HTTP client
// (libcurl) and a webhook receiver on 127.0.0.1 with a free port.
//
// Everything here is test-only and single-threaded from the test's point of
// view; the receiver runs its own thread and hands requests over under a
// mutex.
#pragma once

#include <rapidjson/document.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/db.h"

namespace eq::it {

struct HttpResult {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

HttpResult httpRequest(const std::string& method, const std::string& url,
                       const std::vector<std::string>& headers = {}, const std::string& body = "");

// Sends raw bytes on a fresh connection to 127.0.0.1:port and reads until the
// server closes or timeout_ms pass. Raw sockets let a test send what curl
// would not (smuggling attempts, pipelines, slow heads).
std::string rawExchange(int port, const std::string& bytes, int timeout_ms = 5000);

// A connected client socket to 127.0.0.1:port, or -1.
int connectTo(int port);

// Helpers every integration suite uses.
int64_t nowMs();  // steady clock, for measuring in tests
// Rate limits count per UTC minute: a test whose requests must fall in one
// window waits, when fewer than `needed_ms` of the current minute are left,
// until the next one begins.
void waitForMinuteRoom(int64_t needed_ms);
void sleepMs(int64_t ms);
// A whole file (a process's log, a /proc entry); "" when it cannot be read.
std::string readFile(const std::string& path);
// A loopback port that refuses connections: bound (so nobody else takes it
// while *fd is open) but not listening. The caller closes *fd.
int refusingPort(int* fd);

struct Key {
  std::string id, api_key;
};
class Stack;
// `eqctl key create --name NAME --json` plus `extra` options; fails the test
// if eqctl does not print the expected JSON.
Key createKey(Stack& stack, const std::string& name, const std::vector<std::string>& extra = {});
// Authenticated requests to the stack's first eq-api (get without a key for
// the public endpoints).
HttpResult post(Stack& stack, const std::string& path, const std::string& body, const Key& key);
HttpResult get(Stack& stack, const std::string& path, const Key* key = nullptr);
// The {code, data, msg} envelope of a response; fails the test otherwise.
rapidjson::Document parse(const HttpResult& r);
// The key's remaining units of a mode, from GET /api/v1/quota.
int64_t quotaOf(Stack& stack, const Key& key, const std::string& mode);
// The task id of an accepted async call, or "" (safe on any thread: no
// assertions here).
std::string taskIdOf(const HttpResult& r);
// The first column of the first row (or -1), and of every row, of a query
// of the stack's database on the test thread's connection (Stack::db());
// the statement written in what both engines understand.
int64_t queryInt(const Stack& stack, const std::string& sql);
std::vector<std::string> queryTexts(const Stack& stack, const std::string& sql);

// Runs `rabbitmqctl ARGS` against the test's broker (scripts/lib/broker.sh
// with EQ_TEST_BROKER_DIR), e.g. "stop_app" / "start_app" to take the broker
// away and bring it back; returns the exit status.
int brokerCtl(const std::string& args);
// Stops ("stop") or starts ("start") the test's PostgreSQL server
// (scripts/lib/postgres.sh with EQ_TEST_PG_DIR; a start keeps its port, so
// its URL stays valid); returns the exit status.
int postgresCtl(const std::string& action);

class Stack;

// Holds the locks every eq-api batch needs, from the test process, the way
// a long eqctl or dispatcher transaction would: SQLite's write lock (reads
// still work, WAL), or on PostgreSQL the tables each batch reads and
// writes first (the key epoch and the rate counts). Every database step of
// eq-api waits up to EQ_API_DB_WAIT_MS (500 ms by default) for it and then
// answers 503 (or, for the steps that settle a call after its answer, logs
// that it could not), having written nothing.
class DbWriteLock {
 public:
  explicit DbWriteLock(const Stack& stack);
  DbWriteLock(const DbWriteLock&) = delete;
  DbWriteLock& operator=(const DbWriteLock&) = delete;
  ~DbWriteLock() { release(); }
  void release();

 private:
  std::unique_ptr<store::Db> db_;
};

// A child process with its stderr and stdout in a log file.
class Process {
 public:
  Process(const std::string& name, const std::vector<std::string>& argv,
          const std::map<std::string, std::string>& env, const std::string& log_path);
  ~Process();
  // Sends SIGTERM and waits; returns the exit status (-1 on timeout, after
  // which the process is killed).
  int terminate(int timeout_ms = 15000);
  void kill9();
  // Waits for the process to exit by itself; returns its exit status, or -1
  // on timeout (the process is then killed).
  int wait(int timeout_ms);
  pid_t pid() const { return pid_; }
  const std::string& logPath() const { return log_path_; }
  // Waits until the log contains `needle`; returns the matching line.
  std::string waitForLog(const std::string& needle, int timeout_ms);

 private:
  std::string name_;
  std::string log_path_;
  pid_t pid_ = -1;
};

struct ReceivedWebhook {
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

class WebhookReceiver {
 public:
  WebhookReceiver();
  ~WebhookReceiver();
  int port() const { return port_; }
  // Waits for the n-th request (1-based) to arrive.
  bool waitFor(size_t n, int timeout_ms);
  std::vector<ReceivedWebhook> received();

 private:
  void run();
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ReceivedWebhook> got_;
};

// What a Stack starts. The defaults are the whole stack of scripts/run.
struct StackOptions {
  int api_processes = 1;  // several eq-api processes on one database
  // The eq-api processes share one port (SO_REUSEPORT, as scripts/run with
  // EQ_API_PROCESSES): url(path, i) is then the same for every i, and the
  // kernel picks the process of each new connection.
  bool shared_port = false;
  // The address each eq-api process listens on (127.0.0.1 unless given):
  // two hosts stand as two loopback addresses, 127.0.0.1 and 127.0.0.2.
  std::vector<std::string> api_hosts;
  std::vector<std::string> worker_modes = {"fast", "standard", "perfect"};  // fast also analyzes
  bool dispatcher = true;
  std::map<std::string, std::string> env;  // extra or overriding EQ_* variables
};

// The whole stack: vhost, database, eq-api(s), workers, dispatcher.
class Stack {
 public:
  explicit Stack(StackOptions opts = {});
  ~Stack();

  // Base URL of the i-th eq-api process.
  std::string url(const std::string& path, int api = 0) const;
  int apiPort(int api = 0) const { return api_ports_.at(static_cast<size_t>(api)); }
  // The stack's store: its EQ_DB_URL, a new connection to it (through the
  // store's seam, so a test's statement runs on either engine; store::Sql
  // pairs what differs), the test thread's own connection, kept for the
  // stack's life (a PostgreSQL connection costs a password exchange), and
  // which engine it is.
  const std::string& dbUrl() const { return env_.at("EQ_DB_URL"); }
  std::unique_ptr<store::Db> openDb() const;
  store::Db& db() const;
  bool onPostgres() const { return dbUrl().starts_with("postgres"); }
  // The SQLite file, for the suites that are about the file itself (disk
  // full, backups); fails the test on PostgreSQL.
  std::string dbPath() const;
  // The broker administrator's URL of this stack's vhost (full rights).
  const std::string& amqpUrl() const { return env_.at("EQ_AMQP_URL"); }
  // The URL a process gets: that of its role's broker user, "eq-api",
  // "eq-worker" or "eq-dispatcher" (the binary's name), in this vhost.
  const std::string& roleUrl(const std::string& binary) const;
  // EQ_INTERNAL_KEY of this stack's processes: what a test signs a message
  // with to pass for one of them.
  const std::string& internalKey() const { return env_.at("EQ_INTERNAL_KEY"); }
  // The process started under this name ("api-0", "worker-fast", "dispatcher").
  Process* process(const std::string& name);
  // Runs eqctl with the stack's environment (plus `env`, which overrides
  // it); returns what it printed, stdout and stderr together.
  std::string eqctl(const std::vector<std::string>& args, int* exit_code = nullptr,
                    const std::map<std::string, std::string>& env = {});
  // Stops every process with SIGTERM; returns true if all exited with 0.
  bool stopAll();
  const std::string& dir() const { return dir_; }

  // Starts one more process with the stack's environment (plus `env`), such
  // as a second worker of a mode or a replacement for a killed dispatcher:
  // args[0] names a binary of EQ_BIN_DIR ("eq-worker"). Its log is
  // dir()/<name>.log (opened for appending, so a FIFO made there first
  // receives it); process(name) then returns this process. Returns at once.
  Process* spawn(const std::string& name, const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env = {});
  // A request to the RabbitMQ management API (GET unless given), path
  // relative to /api with "{vhost}" replaced by this stack's vhost, e.g.
  // "/queues/{vhost}/eq.jobs.fast"; a body is sent as JSON.
  HttpResult management(const std::string& path, const std::string& method = "GET",
                        const std::string& json_body = "");

  WebhookReceiver receiver;

 private:
  // OpenAPI check (EQ_TEST_PRISM=1): see the block at the end of this file.
  void startPrism();
  void stopPrism();
  std::vector<std::unique_ptr<Process>> prism_;
  std::vector<int> prism_ports_;  // one prism proxy per eq-api, same index

  std::map<std::string, std::string> env_;
  std::string dir_;
  std::string vhost_;
  std::string pg_schema_;                  // EQ_TEST_STORE=postgres: this stack's schema
  mutable std::unique_ptr<store::Db> db_;  // see db()
  std::string mgmt_;
  std::map<std::string, std::string> role_urls_;  // by binary name, see roleUrl()
  // Declares the topology in vhost_ as the administrator and gives the role
  // users their permissions there.
  void grantRoles(const std::string& auth, const std::string& amqp_port);
  // EQ_DB_URL: a SQLite file in dir_, or a fresh schema on the test server.
  void placeStore();
  std::string bin_;
  std::vector<int> api_ports_;
  std::vector<std::string> api_hosts_;  // the address of each, same index
  std::vector<std::unique_ptr<Process>> procs_;
  std::map<std::string, Process*> by_name_;
};

// A webhook receiver for many concurrent deliveries: every request is
// answered 200 on a thread of its own, after `delay_ms` (a slow receiver
// keeps deliveries in flight), and counted under the "task_id" of its body.
class TaskWebhookReceiver {
 public:
  explicit TaskWebhookReceiver(int delay_ms = 0);
  ~TaskWebhookReceiver();
  TaskWebhookReceiver(const TaskWebhookReceiver&) = delete;
  TaskWebhookReceiver& operator=(const TaskWebhookReceiver&) = delete;

  std::string url() const;  // http://127.0.0.1:<port>/hook
  size_t total();           // requests received so far (counted before the answer)
  std::map<std::string, int> countsByTask();
  // Waits until `n` requests were received, or every id in `ids` was seen.
  bool waitForTotal(size_t n, int timeout_ms);
  bool waitForAll(const std::vector<std::string>& ids, int timeout_ms);

 private:
  void run();
  void serve(int fd);
  int delay_ms_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> handlers_;  // joined by the destructor
  std::map<std::string, int> by_task_;
  size_t total_ = 0;
};

}  // namespace eq::it

// ------------------------------------ appended: scripted receiver, verifiers

#include <functional>

namespace eq::it {

// How a HookServer answers one request.
struct HookReply {
  int status = 200;
  std::vector<std::string> headers;  // extra "Name: value" lines
  bool hang = false;  // read the request and never answer (until the peer or server closes)
  std::string body;   // sent with Content-Type: application/json when not empty
};

struct HookRequest {
  ReceivedWebhook webhook;
  int64_t at_ms = 0;   // steady clock, when the request was fully read
  int connection = 0;  // 1-based index of the TCP connection it came on
};

// A webhook receiver on 127.0.0.1 whose answers a test scripts: a function
// of the request and its 1-based number picks status, headers or a hang.
// Keeps connections alive (so the dispatcher's connection reuse shows in
// connections()) and serves each connection on a thread of its own, so a
// hanging answer holds only its connection. The destructor ends hangs.
class HookServer {
 public:
  using ReplyFn = std::function<HookReply(const ReceivedWebhook&, size_t n)>;
  explicit HookServer(ReplyFn reply = {});
  ~HookServer();
  HookServer(const HookServer&) = delete;
  HookServer& operator=(const HookServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path = "/hook") const;
  void setReply(ReplyFn reply);  // for the requests that come next
  bool waitFor(size_t n, int timeout_ms);
  std::vector<HookRequest> received();
  int connections();

 private:
  void run();
  void serve(int fd, int connection);
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  ReplyFn reply_;
  std::vector<HookRequest> got_;
  std::vector<std::thread> handlers_;  // touched by the accept thread only, joined at the end
  int connections_ = 0;
};

// Runs tests/webhook-verify/verify.js (node with @octokit/webhooks-methods
// and standardwebhooks, installed by scripts/test) on a received webhook.
// True only when both off-the-shelf verifiers accept it with `secret`;
// *output gets what the script printed. With `against_openapi` (always under
// EQ_TEST_PRISM=1) the webhook must also match the taskFinished callback of
// schema/openapi.yaml (tests/openapi/check-webhook.js).
bool verifyWithNpm(const std::string& secret, const ReceivedWebhook& w,
                   std::string* output = nullptr, bool against_openapi = false);

}  // namespace eq::it

// ------------------------------------ appended: OpenAPI check through prism
//
// With EQ_TEST_PRISM=1 every Stack starts `prism proxy --errors` (npm
// @stoplight/prism-cli from tests/openapi, installed by scripts/test) in front
// of each eq-api with schema/openapi.yaml, and url() leads through it, so the
// tests exercise the API through an independent validator of the document.
// httpRequest() then inspects what prism did (see checkThroughPrism in
// stack.cc):
// - a response that breaks the document fails the running test: prism lists
//   it in its `sl-violations` header (an undeclared status as a warning) or,
//   for error-level violations, replaces the answer with its own 500
//   application/problem+json of type ...#VIOLATIONS;
// - a request the document refuses (prism answers it itself: 422, or its own
//   401/404/405/400, always without X-Request-Id) is one a test sends on
//   purpose to see the server refuse it. It is sent again directly to eq-api,
//   whose answer must then be a 4xx too (a 2xx or 5xx fails the test: server
//   and document disagree), and that answer is returned.
// Raw-socket tests (apiPort()) bypass prism. Failures seen on other threads
// are reported on the main thread by its next request or by stopAll().
// A proxy never sees the webhooks the dispatcher sends, so in this mode
// verifyWithNpm() also checks each webhook against the document's
// taskFinished callback (tests/openapi/check-webhook.js, ajv).
namespace eq::it {

// True when this process runs its stacks behind prism.
bool prismEnabled();

}  // namespace eq::it

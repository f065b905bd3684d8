// Fault injection on the async pipeline (issue 4; docs/contract.md §1, §5, §6):
// real processes killed with SIGKILL by the pid this test started, the
// broker restarted under load, and a job driven into the work queue's
// delivery limit. What each case proves is written above it; the measured
// numbers are printed as test messages (ctest runs the module with
// --log_level=message) and summarised in docs/operations.md.
//
// The built-in engine answers in well under a millisecond, so "a job in
// flight" cannot be produced by killing a busy worker at a random moment.
// The cases make it deterministic instead:
//   - SIGSTOP a worker first: the broker still hands it jobs, up to its
//     prefetch (128 by default), which stay unacked until the SIGKILL
//     returns them to the queue;
//   - or give a worker a stderr it cannot write to (a full FIFO), so it
//     blocks on its first log line of a job, "job started" (EQ_LOG_LEVEL=
//     debug), after it has taken the job and published task.running and
//     before the engine runs; that is where the SIGKILL finds it.
// Neither needs a hook in production code.
#include <fcntl.h>
#include <netinet/in.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/stack.h"

using eq::it::createKey;
using eq::it::get;
using eq::it::HttpResult;
using eq::it::Key;
using eq::it::nowMs;
using eq::it::parse;
using eq::it::post;
using eq::it::Process;
using eq::it::queryInt;
using eq::it::queryTexts;
using eq::it::quotaOf;
using eq::it::readFile;
using eq::it::refusingPort;
using eq::it::sleepMs;
using eq::it::Stack;
using eq::it::StackOptions;
using eq::it::taskIdOf;
using eq::it::TaskWebhookReceiver;

namespace {

constexpr int64_t kFastAnswerMs = 1000;  // docs/contract.md §2: a fast 503, here within 1 s

std::string asyncBody(const std::string& webhook_url, int n) {
  std::string body = R"({"mode":"fast","message":"今天被老板骂了，好难过 )" + std::to_string(n) +
                     R"(","reply_count":1)";
  if (!webhook_url.empty()) body += R"(,"webhook_url":")" + webhook_url + "\"";
  return body + "}";
}

// What GET /api/v1/task/{id} says, reduced to what these cases check.
struct TaskView {
  std::string status;
  int error_code = 0;
  std::string error_msg;
  std::string webhook_status;  // "" when the task has no webhook
  int webhook_attempts = 0;
};

TaskView taskView(Stack& stack, const Key& key, const std::string& task_id) {
  HttpResult r = get(stack, "/api/v1/task/" + task_id, &key);
  BOOST_REQUIRE_MESSAGE(r.status == 200,
                        "GET task " << task_id << ": " << r.status << " " << r.body);
  rapidjson::Document d = parse(r);
  const rapidjson::Value& data = d["data"];
  TaskView v;
  v.status = data["status"].GetString();
  if (data["error"].IsObject()) {
    v.error_code = data["error"]["code"].GetInt();
    v.error_msg = data["error"]["msg"].GetString();
  }
  if (data["webhook"].IsObject()) {
    v.webhook_status = data["webhook"]["status"].GetString();
    v.webhook_attempts = data["webhook"]["attempts"].GetInt();
  }
  return v;
}

bool isFinal(const std::string& status) { return status == "succeeded" || status == "failed"; }

// Polls every task until all satisfy `done` or timeout_ms pass; returns the
// last view of each.
std::map<std::string, TaskView> pollTasks(Stack& stack, const Key& key,
                                          const std::vector<std::string>& ids,
                                          const std::function<bool(const TaskView&)>& done,
                                          int64_t timeout_ms) {
  std::map<std::string, TaskView> views;
  std::set<std::string> open(ids.begin(), ids.end());
  int64_t until = nowMs() + timeout_ms;
  while (true) {
    for (auto it = open.begin(); it != open.end();) {
      TaskView v = taskView(stack, key, *it);
      views[*it] = v;
      it = done(v) ? open.erase(it) : std::next(it);
    }
    if (open.empty() || nowMs() > until) break;
    sleepMs(200);
  }
  return views;
}

// Counts the "job started" lines (EQ_LOG_LEVEL=debug) in the logs of the
// named processes, and how many of them were redeliveries.
struct JobStarts {
  int total = 0;
  int redelivered = 0;
  int max_delivery_count = 0;
};

JobStarts countJobStarts(const std::vector<std::string>& log_paths) {
  JobStarts s;
  for (const std::string& path : log_paths) {
    std::istringstream lines(readFile(path));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find("\"msg\":\"job started\"") == std::string::npos) continue;
      ++s.total;
      if (line.find("\"redelivered\":1") != std::string::npos) ++s.redelivered;
      size_t at = line.find("\"delivery_count\":");
      if (at != std::string::npos) {
        s.max_delivery_count = std::max(s.max_delivery_count, std::atoi(line.c_str() + at + 17));
      }
    }
  }
  return s;
}

// A worker's stderr as a FIFO this test holds both ends of. The test reads
// it like a log until the worker is consuming, then fills it: the worker's
// next log line then blocks it inside write(2). Closing the FIFO (the
// destructor, also on a failed assertion) makes such a write fail with
// EPIPE, so a blocked worker can always be stopped.
class StallableLog {
 public:
  explicit StallableLog(const std::string& path) : path_(path) {
    BOOST_REQUIRE_MESSAGE(::mkfifo(path.c_str(), 0600) == 0, "mkfifo " << path);
    read_fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    write_fd_ = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    BOOST_REQUIRE(read_fd_ >= 0 && write_fd_ >= 0);
  }
  ~StallableLog() {
    ::close(write_fd_);
    ::close(read_fd_);
  }
  StallableLog(const StallableLog&) = delete;
  StallableLog& operator=(const StallableLog&) = delete;

  // Reads what the process wrote until `needle` shows up.
  void readUntil(const std::string& needle, int64_t timeout_ms) {
    int64_t until = nowMs() + timeout_ms;
    char buf[4096];
    while (text_.find(needle) == std::string::npos) {
      BOOST_REQUIRE_MESSAGE(nowMs() < until, path_ << " never said '" << needle << "': " << text_);
      ssize_t n = ::read(read_fd_, buf, sizeof buf);
      if (n > 0)
        text_.append(buf, static_cast<size_t>(n));
      else
        sleepMs(20);
    }
  }

  // Fills the pipe: whole pages first, then single bytes, so not even a
  // short line fits any more.
  void fill() {
    std::string page(4096, '#');
    while (::write(write_fd_, page.data(), page.size()) > 0) {
    }
    while (::write(write_fd_, "#", 1) > 0) {
    }
  }

  const std::string& text() const { return text_; }

 private:
  std::string path_;
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::string text_;
};

// True while the process sleeps inside write(2, ...): blocked on a full
// stderr (see StallableLog). /proc/PID/syscall shows the number and
// arguments of the system call a sleeping task is in.
bool blockedWritingStderr(pid_t pid) {
  std::string s = readFile("/proc/" + std::to_string(pid) + "/syscall");
  return s.rfind(std::to_string(SYS_write) + " 0x2 ", 0) == 0;
}

// Starts a process whose stderr is a StallableLog: once it has logged
// `ready` the log is filled, so the process blocks on its next log line.
// The log is kept in `logs`, which must be destroyed before the stack.
Process* startStalled(Stack& stack, std::vector<std::unique_ptr<StallableLog>>& logs,
                      const std::string& name, const std::vector<std::string>& args,
                      const std::string& ready,
                      const std::map<std::string, std::string>& env = {}) {
  logs.push_back(std::make_unique<StallableLog>(stack.dir() + "/" + name + ".log"));
  Process* p = stack.spawn(name, args, env);
  logs.back()->readUntil(ready, 20000);
  logs.back()->fill();
  return p;
}

bool waitBlocked(const Process* p, int64_t timeout_ms) {
  int64_t until = nowMs() + timeout_ms;
  while (nowMs() < until) {
    if (blockedWritingStderr(p->pid())) return true;
    sleepMs(20);
  }
  return false;
}

// A queue as the RabbitMQ management API (and so its UI) shows it. The
// numbers are statistics, refreshed every 5 s by default (every 1 s under
// scripts/test: EQ_BROKER_STATS_SECONDS in scripts/lib/broker.sh).
struct QueueStats {
  int64_t messages = -1, ready = -1, unacked = -1, consumers = -1;
};

std::ostream& operator<<(std::ostream& os, const QueueStats& q) {
  return os << "messages " << q.messages << ", ready " << q.ready << ", unacked " << q.unacked
            << ", consumers " << q.consumers;
}

// Polls the queue's statistics until `want` holds or timeout_ms pass;
// returns the last ones read.
QueueStats waitQueueStats(Stack& stack, const std::string& queue,
                          const std::function<bool(const QueueStats&)>& want, int64_t timeout_ms) {
  QueueStats q;
  for (int64_t until = nowMs() + timeout_ms; nowMs() < until; sleepMs(250)) {
    HttpResult r = stack.management("/queues/{vhost}/" + queue);
    rapidjson::Document d;
    d.Parse(r.body.c_str());
    if (r.status != 200 || !d.IsObject() || !d.HasMember("messages") ||
        !d.HasMember("messages_unacknowledged") || !d.HasMember("consumers")) {
      continue;
    }
    q.messages = d["messages"].GetInt64();
    q.ready = d["messages_ready"].GetInt64();
    q.unacked = d["messages_unacknowledged"].GetInt64();
    q.consumers = d["consumers"].GetInt64();
    if (want(q)) break;
  }
  return q;
}

// Takes RabbitMQ away (stop_app: the node stays up, every connection is
// closed) and always brings it back, also when an assertion failed in
// between. A compact copy of resilience_test.cc's BrokerOutage.
class BrokerOutage {
 public:
  BrokerOutage() = default;
  BrokerOutage(const BrokerOutage&) = delete;
  BrokerOutage& operator=(const BrokerOutage&) = delete;
  ~BrokerOutage() {
    if (down_) startApp();
  }

  void stop() {
    down_ = true;
    stopping_at_ms_ = nowMs();
    int rc = eq::it::brokerCtl("stop_app");
    stopped_at_ms_ = nowMs();
    BOOST_REQUIRE_MESSAGE(rc == 0, "rabbitmqctl stop_app failed: " << rc);
  }

  // Returns once the app runs again (start_app + await_startup).
  void bringBack() {
    starting_at_ms_ = nowMs();
    int rc = startApp();
    back_at_ms_ = nowMs();
    BOOST_REQUIRE_MESSAGE(rc == 0, "rabbitmqctl start_app/await_startup failed: " << rc);
    down_ = false;  // else the destructor tries once more
  }

  int64_t stoppingAtMs() const { return stopping_at_ms_; }
  int64_t stoppedAtMs() const { return stopped_at_ms_; }
  int64_t startingAtMs() const { return starting_at_ms_; }
  int64_t backAtMs() const { return back_at_ms_; }

 private:
  static int startApp() {
    int rc = eq::it::brokerCtl("start_app");
    if (rc == 0) rc = eq::it::brokerCtl("await_startup");
    return rc;
  }

  bool down_ = false;
  int64_t stopping_at_ms_ = 0, stopped_at_ms_ = 0, starting_at_ms_ = 0, back_at_ms_ = 0;
};

// Task counts by status, read from the stack's database (the api only
// shows tasks by id, and a call answered 503 never told us its id).
std::map<std::string, int64_t> taskStatusCounts(const eq::it::Stack& stack) {
  std::map<std::string, int64_t> counts;
  auto r = stack.db().exec(
      eq::store::Sql{"SELECT status, count(*) FROM tasks GROUP BY status"}, {},
      [&](const eq::store::Row& row) { counts[std::string(row.text(0))] = row.int64(1); });
  BOOST_REQUIRE_MESSAGE(r.isOk(), r.status().msg());
  return counts;
}

int count(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

// The broker's memory alarm, raised for the object's life:
// set_vm_memory_high_watermark 0 raises it at once (RabbitMQ's documented
// way to stop all publishing); 0.4 is the default, which
// scripts/lib/broker.sh does not change. Always cleared again.
struct MemoryAlarm {
  MemoryAlarm() { BOOST_REQUIRE(eq::it::brokerCtl("set_vm_memory_high_watermark 0") == 0); }
  ~MemoryAlarm() { clear(); }
  MemoryAlarm(const MemoryAlarm&) = delete;
  MemoryAlarm& operator=(const MemoryAlarm&) = delete;
  void clear() {
    if (on) eq::it::brokerCtl("set_vm_memory_high_watermark 0.4");
    on = false;
  }
  bool on = true;
};

// One async submission as the submitting thread saw it.
struct Submission {
  int64_t at_ms = 0;  // when it was sent
  int64_t latency_ms = 0;
  long status = 0;
  std::string task_id;
  std::string body;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(pipeline)

// 1. Two fast workers; 200 async calls submitted from four threads while one
// worker slot is killed three times. Each victim is SIGSTOPped first, so the
// broker has handed it jobs (up to its prefetch) that it holds unacked when the
// SIGKILL comes (the third is killed without the stop, at whatever it was
// doing). Every job held by a killed worker is redelivered to a live one:
// all 200 tasks succeed, each is charged exactly once, and every task's
// webhook reaches the receiver at least once.
BOOST_AUTO_TEST_CASE(sigkill_of_a_worker_with_200_tasks_in_flight_loses_nothing) {
  constexpr int kTasks = 200;
  constexpr int kThreads = 4;
  constexpr int kQuota = 1000;
  TaskWebhookReceiver receiver;
  StackOptions o;
  o.worker_modes = {"fast"};
  o.env["EQ_LOG_LEVEL"] = "debug";  // "job started" lines, counted below
  Stack stack(o);
  Process* survivor = stack.spawn("worker-fast-b", {"eq-worker", "--mode", "fast"});
  survivor->waitForLog("consuming", 20000);
  Key key = createKey(stack, "pipeline-kill-worker",
                      {"--quota-fast", std::to_string(kQuota), "--rate", "100000"});
  BOOST_REQUIRE(quotaOf(stack, key, "fast") == kQuota);

  std::vector<std::string> worker_logs = {stack.process("worker-fast")->logPath(),
                                          survivor->logPath()};
  Process* victim = stack.process("worker-fast");
  BOOST_REQUIRE(::kill(victim->pid(), SIGSTOP) == 0);

  std::mutex mu;
  std::vector<Submission> subs;
  std::atomic<int> answered{0};
  int64_t submit_start = nowMs();
  std::vector<std::jthread> submitters;  // joined on the way out, also after a failure
  for (int t = 0; t < kThreads; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = 0; i < kTasks / kThreads; ++i) {
        Submission s;
        s.at_ms = nowMs();
        HttpResult r =
            post(stack, "/api/v1/reply/async", asyncBody(receiver.url(), t * 1000 + i), key);
        s.latency_ms = nowMs() - s.at_ms;
        s.status = r.status;
        s.task_id = taskIdOf(r);
        s.body = r.body;
        {
          std::lock_guard<std::mutex> lock(mu);
          subs.push_back(std::move(s));
        }
        ++answered;
      }
    });
  }

  // Three kills of the victim's slot while the submissions run; a fresh
  // worker takes the slot after each.
  auto waitAnswered = [&](int n) {
    int64_t until = nowMs() + 60000;
    while (answered.load() < n && nowMs() < until) sleepMs(5);
  };
  std::vector<int> killed_at;  // submissions answered at each kill
  for (int round = 1; round <= 3; ++round) {
    waitAnswered(round * 55);
    if (round == 2) {
      // The replacement from round 1 is stopped only now, so it served
      // for a while before it too holds one job unacked.
      BOOST_REQUIRE(::kill(victim->pid(), SIGSTOP) == 0);
      waitAnswered(round * 55 + 10);
    }
    killed_at.push_back(answered.load());
    victim->kill9();
    std::string name = "worker-fast-" + std::to_string(round + 1);
    victim = stack.spawn(name, {"eq-worker", "--mode", "fast"});
    worker_logs.push_back(victim->logPath());
    victim->waitForLog("consuming", 20000);
  }
  for (std::jthread& t : submitters) t.join();
  int64_t submit_ms = nowMs() - submit_start;

  std::vector<std::string> ids;
  int64_t max_latency = 0;
  for (const Submission& s : subs) {
    BOOST_TEST(s.status == 200, "async call answered " << s.status << ": " << s.body);
    if (!s.task_id.empty()) ids.push_back(s.task_id);
    max_latency = std::max(max_latency, s.latency_ms);
  }
  BOOST_TEST_MESSAGE(subs.size() << " async calls answered in " << submit_ms << " ms (slowest "
                                 << max_latency << " ms); victim killed after " << killed_at[0]
                                 << ", " << killed_at[1] << ", " << killed_at[2] << " answers");
  BOOST_REQUIRE_EQUAL(ids.size(), static_cast<size_t>(kTasks));
  BOOST_TEST(std::set<std::string>(ids.begin(), ids.end()).size() == ids.size(),
             "task ids are unique");

  int64_t wait_start = nowMs();
  auto views = pollTasks(
      stack, key, ids, [](const TaskView& v) { return isFinal(v.status); }, 60000);
  int succeeded = 0;
  for (const auto& [id, v] : views) {
    if (v.status == "succeeded")
      ++succeeded;
    else
      BOOST_ERROR(id << " ended " << v.status << " " << v.error_code << " " << v.error_msg);
  }
  BOOST_TEST_MESSAGE(succeeded << "/" << kTasks << " tasks succeeded; the last one "
                               << nowMs() - wait_start << " ms after the last submission");
  BOOST_TEST(succeeded == kTasks);
  BOOST_TEST(quotaOf(stack, key, "fast") == kQuota - kTasks, "each task charged exactly once");

  bool all_seen = receiver.waitForAll(ids, 60000);
  std::map<std::string, int> counts = receiver.countsByTask();
  int duplicates = 0;
  for (const std::string& id : ids) {
    auto it = counts.find(id);
    BOOST_TEST((it != counts.end() && it->second >= 1), "no webhook for " << id);
    if (it != counts.end() && it->second > 1) duplicates += it->second - 1;
  }
  BOOST_TEST(all_seen);
  JobStarts starts = countJobStarts(worker_logs);
  BOOST_TEST_MESSAGE("webhooks: " << receiver.total() << " requests for " << counts.size()
                                  << " tasks (" << duplicates << " duplicates); jobs started "
                                  << starts.total << " times, " << starts.redelivered
                                  << " of them redeliveries (highest x-delivery-count "
                                  << starts.max_delivery_count << ")");
  // The two stopped victims each held a job they never started: at least
  // those came back, as redeliveries.
  BOOST_TEST(starts.redelivered >= 2, "the jobs held by killed workers were redelivered");
  BOOST_TEST(starts.total >= kTasks);
}

// 2. RabbitMQ restarted (stop_app, start_app) while a client submits an
// async call every 20 ms. While the broker is away the api answers 503
// within a second, never hangs; every call answered 200 reaches a final
// state once the broker is back (jobs and events are in durable quorum
// queues); quota = initial - succeeded tasks (a failed task is refunded);
// and sync calls work again afterwards.
BOOST_AUTO_TEST_CASE(broker_restart_while_accepting_async_calls) {
  // Units for every call the run may accept: a call every 20 ms is accepted
  // until stop_app closes the connections, which took 18.7 s on a loaded
  // machine (999 accepted against 1,000 units, the rest then 402).
  constexpr int kQuota = 5000;
  constexpr int64_t kIntervalMs = 20;
  constexpr int64_t kMinSubmitMs = 8000;
  constexpr int64_t kTailMs = 2000;  // submissions go on this long after the broker is back
  constexpr int64_t kFinalWithinMs = 60000;
  StackOptions o;
  o.worker_modes = {"fast"};
  o.env["EQ_LOG_LEVEL"] = "debug";  // the worker's "job started" lines show redeliveries
  Stack stack(o);
  Key key = createKey(stack, "pipeline-broker-restart",
                      {"--quota-fast", std::to_string(kQuota), "--rate", "100000"});
  HttpResult warm =
      post(stack, "/api/v1/reply", R"({"mode":"fast","message":"你好","reply_count":1})", key);
  BOOST_REQUIRE_MESSAGE(warm.status == 200, "the stack works before the outage: " << warm.body);
  int64_t initial = quotaOf(stack, key, "fast");

  std::atomic<bool> stop_submitting{false};
  std::vector<Submission> subs;
  int64_t submit_start = nowMs();
  std::jthread submitter([&](std::stop_token st) {
    int n = 0;
    int64_t next = nowMs();
    while (!stop_submitting.load() && !st.stop_requested()) {
      Submission s;
      s.at_ms = nowMs();
      HttpResult r = post(stack, "/api/v1/reply/async", asyncBody("", n++), key);
      s.latency_ms = nowMs() - s.at_ms;
      s.status = r.status;
      s.task_id = taskIdOf(r);
      s.body = r.body;
      subs.push_back(std::move(s));
      next += kIntervalMs;
      int64_t wait = next - nowMs();
      if (wait > 0)
        sleepMs(wait);
      else
        next = nowMs();
    }
  });

  BrokerOutage outage;
  sleepMs(1500);
  outage.stop();
  sleepMs(1000);
  outage.bringBack();
  while (nowMs() - outage.backAtMs() < kTailMs || nowMs() - submit_start < kMinSubmitMs) {
    sleepMs(50);
  }
  stop_submitting = true;
  submitter.join();
  BOOST_TEST_MESSAGE("outage: stop_app issued at +"
                     << outage.stoppingAtMs() - submit_start << " ms, returned after "
                     << outage.stoppedAtMs() - outage.stoppingAtMs() << " ms; start_app issued at +"
                     << outage.startingAtMs() - submit_start << " ms, broker up after "
                     << outage.backAtMs() - outage.startingAtMs() << " ms");

  // Every answer is a 200 or a fast 503.
  std::vector<std::string> accepted;
  int refused = 0, accepted_while_stopping = 0;
  int64_t slowest_503 = 0, slowest = 0, first_200_after = -1, first_503_after = -1;
  for (const Submission& s : subs) {
    slowest = std::max(slowest, s.latency_ms);
    if (s.status == 200) {
      BOOST_TEST(!s.task_id.empty(), "a 200 without task_id: " << s.body);
      accepted.push_back(s.task_id);
      // stop_app closes client connections only some way into its run.
      if (s.at_ms >= outage.stoppingAtMs() && s.at_ms < outage.stoppedAtMs()) {
        ++accepted_while_stopping;
      }
      if (s.at_ms >= outage.startingAtMs() && first_200_after < 0) {
        first_200_after = s.at_ms + s.latency_ms - outage.startingAtMs();
      }
    } else {
      if (first_503_after < 0) first_503_after = s.at_ms - outage.stoppingAtMs();
      BOOST_TEST(s.status == 503, "answer " << s.status << ": " << s.body);
      ++refused;
      slowest_503 = std::max(slowest_503, s.latency_ms);
      BOOST_TEST(s.latency_ms < kFastAnswerMs, "a 503 took " << s.latency_ms << " ms");
    }
  }
  BOOST_TEST_MESSAGE(
      subs.size() << " async calls: " << accepted.size() << " accepted (" << accepted_while_stopping
                  << " of them while stop_app ran), " << refused << " answered 503 (the first sent "
                  << first_503_after << " ms after stop_app was issued; slowest 503 " << slowest_503
                  << " ms); slowest answer of all " << slowest << " ms; first 200 again "
                  << first_200_after << " ms after start_app was issued");
  BOOST_TEST(refused > 0, "the outage was seen by the client");
  BOOST_TEST(first_200_after >= 0, "calls are accepted again after the broker is back");
  BOOST_TEST(slowest < 5000, "no call hung");

  auto views = pollTasks(
      stack, key, accepted, [](const TaskView& v) { return isFinal(v.status); }, kFinalWithinMs);
  int succeeded = 0, failed = 0;
  for (const auto& [id, v] : views) {
    if (v.status == "succeeded") {
      ++succeeded;
    } else if (v.status == "failed") {
      ++failed;
      BOOST_TEST(v.error_code >= 500, id << " failed with code " << v.error_code);
      BOOST_TEST(!v.error_msg.empty(), id << " failed without a reason");
    } else {
      BOOST_ERROR(id << " accepted but still " << v.status << " after " << kFinalWithinMs << " ms");
    }
  }
  JobStarts starts = countJobStarts({stack.process("worker-fast")->logPath()});
  BOOST_TEST_MESSAGE("accepted tasks: " << succeeded << " succeeded, " << failed
                                        << " failed; all final " << nowMs() - outage.backAtMs()
                                        << " ms after the broker was up; jobs started "
                                        << starts.total << " times, " << starts.redelivered
                                        << " redeliveries (highest x-delivery-count "
                                        << starts.max_delivery_count << ")");

  // The database holds the refused calls too (failed at once with 503 and
  // refunded): none is left queued or running, and only successes cost.
  std::map<std::string, int64_t> counts = taskStatusCounts(stack);
  std::ostringstream summary;
  for (const auto& [status, n] : counts) summary << status << "=" << n << " ";
  BOOST_TEST_MESSAGE("tasks in SQLite: " << summary.str());
  BOOST_TEST(counts["queued"] == 0, "tasks left queued: " << summary.str());
  BOOST_TEST(counts["running"] == 0, "tasks left running: " << summary.str());
  BOOST_TEST(counts["succeeded"] == succeeded, "only accepted calls succeed: " << summary.str());
  BOOST_TEST(quotaOf(stack, key, "fast") == initial - counts["succeeded"],
             "quota = initial - succeeded");

  HttpResult again =
      post(stack, "/api/v1/reply", R"({"mode":"fast","message":"你好","reply_count":1})", key);
  BOOST_TEST(again.status == 200,
             "a sync call after the restart: " << again.status << " " << again.body);
}

// 3. The dispatcher is SIGKILLed while webhooks are in flight (the receiver
// takes 300 ms per request) and a new one is started: every task's webhook
// still reaches the receiver at least once, and GET task says delivered.
BOOST_AUTO_TEST_CASE(sigkill_of_the_dispatcher_mid_delivery_loses_no_webhook) {
  constexpr int kTasks = 30;
  TaskWebhookReceiver receiver(300);
  StackOptions o;
  o.worker_modes = {"fast"};
  Stack stack(o);
  Key key = createKey(stack, "pipeline-kill-dispatcher",
                      {"--quota-fast", std::to_string(100), "--rate", "100000"});

  std::vector<std::string> ids;
  for (int i = 0; i < kTasks; ++i) {
    HttpResult r = post(stack, "/api/v1/reply/async", asyncBody(receiver.url(), i), key);
    BOOST_REQUIRE_MESSAGE(r.status == 200, "async call: " << r.status << " " << r.body);
    ids.push_back(taskIdOf(r));
  }
  BOOST_REQUIRE_MESSAGE(receiver.waitForTotal(4, 30000), "no webhooks arrived");
  size_t before_kill = receiver.total();
  int64_t killed_at = nowMs();
  stack.process("dispatcher")->kill9();
  Process* second = stack.spawn("dispatcher-2", {"eq-dispatcher"});
  second->waitForLog("consuming", 20000);
  BOOST_TEST_MESSAGE("dispatcher killed after " << before_kill
                                                << " webhook requests; the new one consumes "
                                                << nowMs() - killed_at << " ms later");

  // Seen is not enough: a request the killed dispatcher sent was never
  // answered to it, so only "delivered" in the task proves that some
  // dispatcher got the receiver's 200 and recorded it.
  bool all_seen = receiver.waitForAll(ids, 120000);
  int64_t seen_ms = nowMs() - killed_at;
  BOOST_TEST(all_seen);
  auto views = pollTasks(
      stack, key, ids, [](const TaskView& v) { return v.webhook_status == "delivered"; }, 120000);
  int64_t delivered_ms = nowMs() - killed_at;
  int delivered = 0;
  for (const auto& [id, v] : views) {
    BOOST_TEST(v.status == "succeeded", id << " is " << v.status);
    if (v.webhook_status == "delivered")
      ++delivered;
    else
      BOOST_ERROR(id << " webhook " << v.webhook_status << " after " << v.webhook_attempts
                     << " attempts");
  }
  std::map<std::string, int> counts = receiver.countsByTask();
  int duplicates = 0;
  for (const std::string& id : ids) {
    auto it = counts.find(id);
    BOOST_TEST((it != counts.end() && it->second >= 1), "no webhook for " << id);
    if (it != counts.end() && it->second > 1) duplicates += it->second - 1;
  }
  BOOST_TEST_MESSAGE("every task seen by the receiver "
                     << seen_ms << " ms after the kill; " << delivered << "/" << kTasks
                     << " recorded delivered after " << delivered_ms << " ms (" << receiver.total()
                     << " requests, " << duplicates << " duplicates)");
}

// 4. A job whose every delivery ends with a SIGKILL of the worker holding
// it (docs/contract.md §5): each worker is started with a stderr it cannot write
// to (StallableLog), so it stops inside the job at "job started", and is
// killed there; a fresh stalled worker is consuming before each kill, ready
// to take the redelivery (a worker started while the job is ready would
// race through it before its log could be filled). The quorum queue's delivery limit dead-letters
// the job after the third crash, the dispatcher (consuming eq.dead) fails the task with 500,
// refunds the unit and sends the task.failed webhook. The case counts the
// crashes until the task fails, which checks x-delivery-limit's arithmetic
// in common/amqp.cc: the expected count is 3.
BOOST_AUTO_TEST_CASE(job_that_crashes_three_workers_fails_with_500_and_is_refunded) {
  constexpr int kExpectedCrashes = 3;
  constexpr int kMaxRounds = 5;
  TaskWebhookReceiver receiver;
  StackOptions o;
  o.worker_modes = {};  // the case starts its own fast workers
  Stack stack(o);
  Key key = createKey(stack, "pipeline-poison",
                      {"--quota-fast", std::to_string(100), "--rate", "100000"});
  int64_t initial = quotaOf(stack, key, "fast");

  // Declared after the stack, so the FIFOs close first and a worker still
  // blocked on one gets EPIPE and can stop when the stack tears down.
  std::vector<std::unique_ptr<StallableLog>> logs;
  std::vector<Process*> workers;
  auto startStalledWorker = [&](int n) {
    workers.push_back(startStalled(stack, logs, "worker-fast-" + std::to_string(n),
                                   {"eq-worker", "--mode", "fast"}, "worker consuming",
                                   {{"EQ_LOG_LEVEL", "debug"}}));
    return workers.back();
  };

  Process* holder = startStalledWorker(1);
  HttpResult r = post(stack, "/api/v1/reply/async", asyncBody(receiver.url(), 0), key);
  BOOST_REQUIRE_MESSAGE(r.status == 200, "async call: " << r.status << " " << r.body);
  std::string task_id = taskIdOf(r);
  BOOST_REQUIRE_MESSAGE(waitBlocked(holder, 10000), "worker 1 never took the job");
  // It published task.running before it stalled: it was inside the job.
  auto running = pollTasks(
      stack, key, {task_id}, [](const TaskView& v) { return v.status == "running"; }, 10000);
  BOOST_TEST(running[task_id].status == "running");
  BOOST_TEST(quotaOf(stack, key, "fast") == initial - 1);

  // What an operator sees meanwhile: the job unacked, one consumer.
  QueueStats held = waitQueueStats(
      stack, "eq.jobs.fast", [](const QueueStats& q) { return q.unacked == 1; }, 15000);
  BOOST_TEST_MESSAGE("eq.jobs.fast while worker 1 holds the job: " << held);
  BOOST_TEST(held.unacked == 1);
  BOOST_TEST(held.consumers == 1);

  int crashes = 0;
  int64_t failed_after_ms = -1;
  TaskView final_view;
  for (int round = 1; round <= kMaxRounds; ++round) {
    Process* next = startStalledWorker(round + 1);  // takes a redelivery, if any
    int64_t killed_at = nowMs();
    holder->kill9();
    ++crashes;
    // Either the next worker stalls inside the job (redelivered), or the
    // job was dead-lettered and the dispatcher fails the task.
    bool redelivered = false;
    int64_t until = nowMs() + 30000;
    while (nowMs() < until) {
      if (blockedWritingStderr(next->pid())) {
        redelivered = true;
        break;
      }
      final_view = taskView(stack, key, task_id);
      if (final_view.status == "failed") break;
      sleepMs(50);
    }
    BOOST_TEST_MESSAGE(
        "crash " << crashes << ": "
                 << (redelivered ? "redelivered to the next worker" : "task " + final_view.status)
                 << " after " << nowMs() - killed_at << " ms");
    if (!redelivered) {
      BOOST_REQUIRE_MESSAGE(final_view.status == "failed",
                            "after crash " << crashes << " the job went nowhere");
      failed_after_ms = nowMs() - killed_at;
      // Give a late redelivery the chance to show up: there must be none.
      sleepMs(1000);
      BOOST_TEST(!blockedWritingStderr(next->pid()), "the job came back after it failed");
      break;
    }
    holder = next;
  }
  BOOST_TEST(crashes == kExpectedCrashes,
             "the job was dead-lettered after " << crashes << " crashed deliveries");
  BOOST_TEST(final_view.status == "failed");
  BOOST_TEST(final_view.error_code == 500);
  BOOST_TEST_MESSAGE("task failed " << failed_after_ms << " ms after the last crash: "
                                    << final_view.error_code << " " << final_view.error_msg);
  BOOST_TEST(quotaOf(stack, key, "fast") == initial, "the failed task is refunded");
  BOOST_TEST(receiver.waitForAll({task_id}, 30000), "the task.failed webhook arrived");
  std::string dispatcher_log = readFile(stack.process("dispatcher")->logPath());
  BOOST_TEST(dispatcher_log.find("\"reason\":\"delivery_limit\"") != std::string::npos,
             "the dispatcher saw the job dead-lettered for its delivery limit");
  for (Process* w : workers) w->kill9();
}

// 5. The dispatcher crashes three times in a row while it holds a task's
// events (a crash loop: each new dispatcher dies before acking what it was
// handed). Each dispatcher is stalled by a full stderr at its first "task
// transition" line, i.e. after it committed a transition and before the ack,
// and SIGKILLed there; a healthy dispatcher follows. eq.task-events has the
// same delivery limit as the job queues, so the third crash dead-letters
// the events to eq.dead. They must not be lost there: dead-lettering keeps
// the routing key "eq.task-events", and the dispatcher applies such a
// message as the task event it is (dispatcher/dispatcher.cc). Losing it
// would leave the task "running" forever with no result and no webhook.
BOOST_AUTO_TEST_CASE(task_events_survive_a_dispatcher_crash_loop) {
  constexpr int kCrashes = 3;
  TaskWebhookReceiver receiver;
  StackOptions o;
  o.worker_modes = {"fast"};
  o.dispatcher = false;  // the case starts its own
  Stack stack(o);
  Key key = createKey(stack, "pipeline-dispatcher-loop",
                      {"--quota-fast", std::to_string(100), "--rate", "100000"});
  int64_t initial = quotaOf(stack, key, "fast");

  std::vector<std::unique_ptr<StallableLog>> logs;  // after the stack: closed first
  auto startStalledDispatcher = [&](int n) {
    return startStalled(stack, logs, "dispatcher-" + std::to_string(n), {"eq-dispatcher"},
                        "dispatcher consuming");
  };
  Process* holder = startStalledDispatcher(1);
  HttpResult r = post(stack, "/api/v1/reply/async", asyncBody(receiver.url(), 0), key);
  BOOST_REQUIRE_MESSAGE(r.status == 200, "async call: " << r.status << " " << r.body);
  std::string task_id = taskIdOf(r);
  BOOST_REQUIRE_MESSAGE(waitBlocked(holder, 10000), "dispatcher 1 never took the task's events");
  // The dispatcher applies the events it holds a batch per transaction and
  // logs after the commit: when task.running and task.succeeded arrive in
  // one read, both are committed before it stalls (and neither is acked).
  std::string held = taskView(stack, key, task_id).status;
  BOOST_TEST((held == "running" || held == "succeeded"), "status " << held);

  for (int crash = 1; crash <= kCrashes; ++crash) {
    Process* next = crash < kCrashes ? startStalledDispatcher(crash + 1) : nullptr;
    holder->kill9();
    if (next == nullptr) break;
    BOOST_REQUIRE_MESSAGE(waitBlocked(next, 10000),
                          "the events did not come back after crash " << crash);
    holder = next;
  }
  // With no dispatcher running, the management API shows where the events
  // went: both to eq.dead, none left in eq.task-events. Both waits outlast
  // several of RabbitMQ's statistics intervals (5 s): a queue whose last
  // consumer was just killed can go a whole interval without message
  // counts in its management record (CI saw eq.task-events without them
  // for the 5 s this wait once had).
  QueueStats dead = waitQueueStats(
      stack, "eq.dead", [](const QueueStats& q) { return q.messages >= 2; }, 15000);
  QueueStats events = waitQueueStats(
      stack, "eq.task-events", [](const QueueStats& q) { return q.messages == 0; }, 15000);
  BOOST_TEST_MESSAGE("after " << kCrashes << " dispatcher crashes: eq.dead " << dead
                              << "; eq.task-events " << events);
  BOOST_TEST(dead.messages == 2, "the third crash dead-lettered both events");
  BOOST_TEST(events.messages == 0);

  // A healthy dispatcher from here on.
  int64_t healthy_at = nowMs();
  Process* healthy = stack.spawn("dispatcher-ok", {"eq-dispatcher"});
  healthy->waitForLog("consuming", 20000);
  auto views = pollTasks(
      stack, key, {task_id}, [](const TaskView& v) { return isFinal(v.status); }, 20000);
  const TaskView& v = views[task_id];
  std::string log = readFile(healthy->logPath());
  size_t dropped = 0;
  for (size_t at = log.find("dead letter dropped"); at != std::string::npos;
       at = log.find("dead letter dropped", at + 1)) {
    ++dropped;
  }
  BOOST_TEST_MESSAGE("after " << kCrashes << " dispatcher crashes the task is " << v.status << " "
                              << nowMs() - healthy_at
                              << " ms after a healthy dispatcher started; it dropped " << dropped
                              << " dead-lettered messages");
  BOOST_TEST(v.status == "succeeded", "the task's final event was lost: task " << v.status);
  BOOST_TEST(quotaOf(stack, key, "fast") == initial - 1);
  BOOST_TEST(receiver.waitForAll({task_id}, 20000), "the task's webhook arrived");
}

// 6. What an operator sees in the management UI (the same statistics
// through its API) when a worker dies holding a job, and when a webhook
// receiver is down. A SIGSTOPped worker holds the job unacked; after its
// SIGKILL, with no other worker, the job is ready again and the queue has
// no consumer; a new worker finishes it. A receiver that refuses
// connections leaves the delivery pending in SQLite while nothing waits in
// RabbitMQ: the task event was acked once the delivery was recorded.
BOOST_AUTO_TEST_CASE(management_view_of_a_dead_worker_and_a_dead_receiver) {
  StackOptions o;
  o.worker_modes = {"fast"};
  Stack stack(o);
  Key key =
      createKey(stack, "pipeline-mgmt", {"--quota-fast", std::to_string(100), "--rate", "100000"});

  // A port nothing listens on: bound, then closed again.
  int fd = -1;
  int dead_port = refusingPort(&fd);
  ::close(fd);
  std::string dead_url = "http://127.0.0.1:" + std::to_string(dead_port) + "/hook";

  Process* worker = stack.process("worker-fast");
  BOOST_REQUIRE(::kill(worker->pid(), SIGSTOP) == 0);
  HttpResult r = post(stack, "/api/v1/reply/async", asyncBody(dead_url, 0), key);
  BOOST_REQUIRE_MESSAGE(r.status == 200, "async call: " << r.status << " " << r.body);
  std::string task_id = taskIdOf(r);

  QueueStats held = waitQueueStats(
      stack, "eq.jobs.fast", [](const QueueStats& q) { return q.unacked == 1; }, 15000);
  BOOST_TEST_MESSAGE("eq.jobs.fast while the stopped worker holds the job: " << held);
  BOOST_TEST((held.unacked == 1 && held.ready == 0 && held.consumers == 1));

  worker->kill9();
  QueueStats orphaned = waitQueueStats(
      stack, "eq.jobs.fast", [](const QueueStats& q) { return q.ready == 1 && q.consumers == 0; },
      15000);
  BOOST_TEST_MESSAGE("eq.jobs.fast after the worker was killed: " << orphaned);
  BOOST_TEST((orphaned.ready == 1 && orphaned.unacked == 0 && orphaned.consumers == 0));

  stack.spawn("worker-fast-2", {"eq-worker", "--mode", "fast"})->waitForLog("consuming", 20000);
  auto views = pollTasks(
      stack, key, {task_id}, [](const TaskView& v) { return v.webhook_attempts >= 1; }, 20000);
  const TaskView& v = views[task_id];
  BOOST_TEST(v.status == "succeeded");
  BOOST_TEST_MESSAGE("with the receiver down: task " << v.status << ", webhook " << v.webhook_status
                                                     << " after " << v.webhook_attempts
                                                     << " attempt(s)");
  BOOST_TEST(v.webhook_status == "pending", "a refused connection is retried later");
  QueueStats events = waitQueueStats(
      stack, "eq.task-events", [](const QueueStats& q) { return q.messages == 0; }, 15000);
  QueueStats jobs = waitQueueStats(
      stack, "eq.jobs.fast", [](const QueueStats& q) { return q.messages == 0; }, 15000);
  BOOST_TEST_MESSAGE("meanwhile eq.task-events: " << events << "; eq.jobs.fast: " << jobs);
  BOOST_TEST(events.messages == 0);
  BOOST_TEST(jobs.messages == 0);
}

// 7. A resource alarm (memory or disk) makes RabbitMQ block every connection
// that publishes: it stops reading from it, so no confirm ever comes and
// the connection stays open. Before the fix in api/broker_bridge.cc every
// async call hung until the client gave up (60 s here). Now the first
// publish fails after the bridge's 3 s confirm timeout, the bridge counts
// as stalled (readyz 503) and later calls answer 503 at once; nothing stays
// charged; service resumes by itself once the alarm clears.
BOOST_AUTO_TEST_CASE(broker_resource_alarm_answers_503_instead_of_hanging) {
  constexpr int64_t kFirstAnswerMs = 5000;  // the 3 s confirm timeout, checked once a second
  StackOptions o;
  o.worker_modes = {"fast"};
  Stack stack(o);
  Key key =
      createKey(stack, "pipeline-alarm", {"--quota-fast", std::to_string(100), "--rate", "100000"});
  std::string sync_body = R"({"mode":"fast","message":"你好","reply_count":1})";
  HttpResult warm = post(stack, "/api/v1/reply/async", asyncBody("", 0), key);
  BOOST_REQUIRE_MESSAGE(warm.status == 200, "before the alarm: " << warm.body);
  int64_t before = quotaOf(stack, key, "fast");

  MemoryAlarm alarm;
  int64_t raised_at = nowMs();

  struct Answer {
    std::string what;
    long status;
    int64_t ms;
  };
  std::vector<Answer> answers;
  auto timedPost = [&](const std::string& what, const std::string& path, const std::string& body) {
    int64_t start = nowMs();
    HttpResult r = post(stack, path, body, key);
    answers.push_back({what, r.status, nowMs() - start});
    return r;
  };
  timedPost("async 1", "/api/v1/reply/async", asyncBody("", 1));
  timedPost("async 2", "/api/v1/reply/async", asyncBody("", 2));
  timedPost("sync", "/api/v1/reply", sync_body);
  timedPost("async 3", "/api/v1/reply/async", asyncBody("", 3));
  HttpResult ready = get(stack, "/readyz", &key);
  std::ostringstream seen;
  for (const Answer& a : answers) seen << a.what << " " << a.status << " in " << a.ms << " ms; ";
  BOOST_TEST_MESSAGE("during the memory alarm: " << seen.str() << "readyz " << ready.status);
  for (size_t i = 0; i < answers.size(); ++i) {
    BOOST_TEST(answers[i].status == 503, answers[i].what << " answered " << answers[i].status);
    BOOST_TEST(answers[i].ms < (i == 0 ? kFirstAnswerMs : kFastAnswerMs),
               answers[i].what << " took " << answers[i].ms << " ms");
  }
  BOOST_TEST(ready.status == 503, "readyz during the alarm");
  BOOST_TEST(quotaOf(stack, key, "fast") == before, "the refused calls cost nothing");

  alarm.clear();
  int64_t cleared_at = nowMs();
  std::string task_id;
  while (nowMs() - cleared_at < 15000) {
    HttpResult r = post(stack, "/api/v1/reply/async", asyncBody("", 9), key);
    if (r.status == 200) {
      task_id = taskIdOf(r);
      break;
    }
    BOOST_TEST(r.status == 503, "while the alarm clears: " << r.status << " " << r.body);
    sleepMs(200);
  }
  BOOST_TEST_MESSAGE("alarm raised for " << cleared_at - raised_at
                                         << " ms; an async call is accepted again "
                                         << nowMs() - cleared_at << " ms after it cleared");
  BOOST_REQUIRE_MESSAGE(!task_id.empty(), "no async call accepted after the alarm cleared");
  auto views = pollTasks(
      stack, key, {task_id}, [](const TaskView& v) { return isFinal(v.status); }, 20000);
  BOOST_TEST(views[task_id].status == "succeeded");
  BOOST_TEST(post(stack, "/api/v1/reply", sync_body, key).status == 200);
  // The job of async 1 was in the socket when the broker stopped reading;
  // it may run now, but its task was failed and refunded at the 503 and
  // stays so.
  sleepMs(1000);
  std::map<std::string, int64_t> counts = taskStatusCounts(stack);
  BOOST_TEST(counts["failed"] == 3, "the three refused async calls' tasks are failed");
  BOOST_TEST(counts["queued"] + counts["running"] == 0);
  BOOST_TEST(quotaOf(stack, key, "fast") == before - 2, "only the two later calls are charged");
}

// 8. Issue 10: a worker holding a full prefetch of jobs is SIGKILLed. The
// worker publishes outcomes without waiting and acks each job only once its
// outcome is confirmed, so many jobs are in its hands at once; it is
// SIGSTOPped before the calls arrive (none can finish), takes 100 async
// jobs and 16 sync calls' jobs from the broker (prefetch 128), and is
// killed with all of them unacked. A fresh worker then gets them all back:
// every async task succeeds and is charged once; every sync call gets its
// answer (200), or a 503/504 and its refund, never silence.
BOOST_AUTO_TEST_CASE(sigkill_of_a_worker_holding_a_full_prefetch_loses_nothing) {
  constexpr int kAsync = 100;
  constexpr int kSync = 16;
  constexpr int kQuota = 1000;
  StackOptions o;
  o.worker_modes = {"fast"};
  Stack stack(o);
  Key key = createKey(stack, "pipeline-prefetch-kill",
                      {"--quota-fast", std::to_string(kQuota), "--rate", "100000"});
  Process* victim = stack.process("worker-fast");
  BOOST_REQUIRE(::kill(victim->pid(), SIGSTOP) == 0);

  std::vector<std::string> ids;
  for (int i = 0; i < kAsync; ++i) {
    HttpResult r = post(stack, "/api/v1/reply/async", asyncBody("", 8000 + i), key);
    BOOST_REQUIRE_MESSAGE(r.status == 200, "async call answered " << r.status << ": " << r.body);
    ids.push_back(taskIdOf(r));
  }
  std::vector<int> sync_status(kSync, 0);
  std::vector<std::jthread> callers;  // joined on the way out, also after a failure
  for (int i = 0; i < kSync; ++i) {
    callers.emplace_back([&, i] {
      std::string body =
          R"({"mode":"fast","message":"同步调用 )" + std::to_string(i) + R"(","reply_count":1})";
      sync_status[i] = post(stack, "/api/v1/reply", body, key).status;
    });
  }
  // Every job sits unacked with the stopped worker (the broker's statistics
  // lag by up to 5 s): async jobs on the quorum queue, sync jobs on the
  // classic one.
  QueueStats held = waitQueueStats(
      stack, "eq.jobs.fast", [](const QueueStats& q) { return q.unacked >= kAsync; }, 20000);
  QueueStats held_sync = waitQueueStats(
      stack, "eq.sync.fast", [](const QueueStats& q) { return q.unacked >= kSync; }, 20000);
  BOOST_TEST_MESSAGE("before the kill: eq.jobs.fast " << held << "; eq.sync.fast " << held_sync);
  BOOST_TEST(held.unacked == kAsync, "the stopped worker held every async job");
  BOOST_TEST(held_sync.unacked == kSync, "the stopped worker held every sync job");
  victim->kill9();
  Process* fresh = stack.spawn("worker-fast-2", {"eq-worker", "--mode", "fast"});
  fresh->waitForLog("consuming", 20000);
  for (std::jthread& t : callers) t.join();

  int sync_ok = 0;
  for (int st : sync_status) {
    BOOST_TEST((st == 200 || st == 503 || st == 504), "sync call answered " << st);
    if (st == 200) ++sync_ok;
  }
  BOOST_TEST_MESSAGE(sync_ok << "/" << kSync << " sync calls answered 200 after the kill");
  // The redelivered sync jobs went on through the counting quorum queue
  // (common/messages.h): one "moved" line per job that came back in time.
  std::string fresh_log = readFile(fresh->logPath());
  size_t moved = 0;
  for (size_t at = fresh_log.find("moved to the counting queue"); at != std::string::npos;
       at = fresh_log.find("moved to the counting queue", at + 1)) {
    ++moved;
  }
  BOOST_TEST_MESSAGE(moved << " redelivered sync jobs moved to eq.jobs.fast");
  BOOST_TEST(moved >= static_cast<size_t>(sync_ok), "every answered sync job was moved first");
  auto views = pollTasks(
      stack, key, ids, [](const TaskView& v) { return isFinal(v.status); }, 60000);
  int succeeded = 0;
  for (const auto& [id, v] : views) {
    if (v.status == "succeeded")
      ++succeeded;
    else
      BOOST_ERROR(id << " ended " << v.status << " " << v.error_code << " " << v.error_msg);
  }
  BOOST_TEST(succeeded == kAsync);
  BOOST_TEST(quotaOf(stack, key, "fast") == kQuota - kAsync - sync_ok,
             "async tasks charged once, failed sync calls refunded");
  QueueStats after = waitQueueStats(
      stack, "eq.jobs.fast", [](const QueueStats& q) { return q.messages == 0; }, 20000);
  BOOST_TEST(after.messages == 0, "nothing left behind: " << after);
  QueueStats after_sync = waitQueueStats(
      stack, "eq.sync.fast", [](const QueueStats& q) { return q.messages == 0; }, 20000);
  BOOST_TEST(after_sync.messages == 0, "nothing left behind: " << after_sync);
}

// 9. Issue 13: eq-api is SIGKILLed with 20 sync calls in flight (charged,
// their jobs held by a stopped worker) and 20 async calls in flight
// (charged, task rows written, their publishes held back by a broker
// resource alarm, so never confirmed). Nobody answers those 40 calls; the
// dispatcher must notice the dead instance and, within a minute, refund
// every sync unit and settle every async task without failing one whose
// job may still run: whether a held publish reached the queue is unknown,
// so each task still queued has its job published again (the job eq-api
// kept with the open charge), and one already run is kept. Every async task
// then succeeds once with its webhook, each settlement is recorded in
// `settlements`, no open charge is left: every unit accounted for, none
// refunded twice.
BOOST_AUTO_TEST_CASE(sigkill_of_eq_api_with_calls_in_flight_settles_every_unit) {
  constexpr int kSync = 20;
  constexpr int kAsync = 20;
  constexpr int kQuota = 1000;
  TaskWebhookReceiver receiver;
  StackOptions o;
  o.worker_modes = {"fast"};
  Stack stack(o);
  Key key = createKey(stack, "pipeline-api-kill",
                      {"--quota-fast", std::to_string(kQuota), "--rate", "100000"});
  const eq::it::Stack& db = stack;
  auto quotaInDb = [&] { return queryInt(db, "SELECT quota_fast FROM accounts"); };
  // Calls that end normally close their open charges (a sync 200 just
  // after its answer) and keep their units: none is left for a sweeper.
  for (int i = 0; i < 5; ++i) {
    BOOST_REQUIRE(post(stack, "/api/v1/reply", R"({"mode":"fast","message":"正常"})", key).status ==
                  200);
  }
  int64_t until = nowMs() + 5000;
  while (queryInt(db, "SELECT count(*) FROM open_charges") > 0 && nowMs() < until) sleepMs(20);
  BOOST_REQUIRE(queryInt(db, "SELECT count(*) FROM open_charges") == 0);
  BOOST_REQUIRE(quotaInDb() == kQuota - 5);
  BOOST_REQUIRE(stack.eqctl({"quota", "grant", key.id, "--fast", "5"}).find("rror") ==
                std::string::npos);
  BOOST_REQUIRE(quotaInDb() == kQuota);

  Process* worker = stack.process("worker-fast");
  BOOST_REQUIRE(::kill(worker->pid(), SIGSTOP) == 0);

  std::vector<std::jthread> callers;  // their calls end when eq-api dies
  for (int i = 0; i < kSync; ++i) {
    callers.emplace_back([&, i] {
      post(stack, "/api/v1/reply",
           R"({"mode":"fast","message":"同步 )" + std::to_string(i) + R"(","reply_count":1})", key);
    });
  }
  until = nowMs() + 20000;
  while (quotaInDb() > kQuota - kSync && nowMs() < until) sleepMs(50);
  int64_t after_sync = quotaInDb();
  BOOST_REQUIRE_MESSAGE(after_sync == kQuota - kSync, "sync calls charged: " << after_sync);

  // The memory alarm stops all publishing: async publishes wait for a
  // confirm that cannot come (eq-api gives up after 3 s; it dies first).
  MemoryAlarm alarm;
  for (int i = 0; i < kAsync; ++i) {
    callers.emplace_back(
        [&, i] { post(stack, "/api/v1/reply/async", asyncBody(receiver.url(), i), key); });
  }
  until = nowMs() + 2500;
  while (quotaInDb() > kQuota - kSync - kAsync && nowMs() < until) sleepMs(20);
  int64_t charged = kQuota - quotaInDb();
  int64_t open = queryInt(db, "SELECT count(*) FROM open_charges");
  BOOST_TEST_MESSAGE("before the kill: " << charged << " units charged, " << open
                                         << " open charges");
  BOOST_REQUIRE_MESSAGE(charged == kSync + kAsync, "all 40 calls charged before the kill");
  BOOST_TEST(open == kSync + kAsync);

  stack.process("api-0")->kill9();
  int64_t killed_at = nowMs();
  for (std::jthread& t : callers) t.join();
  alarm.clear();
  BOOST_REQUIRE(::kill(worker->pid(), SIGCONT) == 0);  // runs the orphaned sync jobs

  // Settled by eq-dispatcher within a minute. An async job whose publish
  // did reach the broker before the kill may have run meanwhile: its task
  // then ended on its own and keeps its unit (settlement "kept"); the others
  // are published again ("republished").
  auto succeeded = [&] {
    return queryInt(db, "SELECT count(*) FROM tasks WHERE status = 'succeeded'");
  };
  until = killed_at + 60000;
  while (nowMs() < until && queryInt(db, "SELECT count(*) FROM open_charges") > 0) sleepMs(100);
  int64_t settled_ms = nowMs() - killed_at;
  int64_t ran = succeeded();  // (not inside the message: queryInt asserts)
  BOOST_TEST_MESSAGE("every open charge settled " << settled_ms << " ms after the kill; " << ran
                                                  << " async jobs had run");
  BOOST_TEST(queryInt(db, "SELECT count(*) FROM open_charges") == 0);
  BOOST_TEST(settled_ms < 60000);
  int64_t republished =
      queryInt(db, "SELECT count(*) FROM settlements WHERE action = 'republished'");
  int64_t kept = queryInt(db, "SELECT count(*) FROM settlements WHERE action = 'kept'");
  BOOST_TEST_MESSAGE(republished << " async jobs published again, " << kept << " kept");
  BOOST_TEST(queryInt(db, "SELECT count(*) FROM settlements WHERE action = 'refunded'") == kSync);
  BOOST_TEST(republished + kept == kAsync);
  BOOST_TEST(queryInt(db, "SELECT count(*) FROM settlements WHERE action = 'task_failed'") == 0);
  std::vector<std::string> tasks = queryTexts(db, "SELECT id FROM tasks");
  BOOST_TEST(tasks.size() == static_cast<size_t>(kAsync));
  BOOST_TEST(receiver.waitForAll(tasks, 30000), "every task's webhook arrived");
  until = nowMs() + 30000;
  while (succeeded() < kAsync && nowMs() < until) sleepMs(100);
  BOOST_TEST(succeeded() == kAsync, "every async task ran and succeeded");
  // Every unit accounted for: back in the quota, or kept by a task that
  // succeeded. Nothing settles twice, and nothing changes later: the
  // orphaned sync jobs ran (their answers went nowhere) and a second copy
  // of an async job changes nothing.
  int64_t quota_now = quotaInDb();
  ran = succeeded();
  BOOST_TEST(quota_now + ran == kQuota, "quota " << quota_now << ", succeeded " << ran);
  sleepMs(2000);
  quota_now = quotaInDb();
  ran = succeeded();
  BOOST_TEST(quota_now + ran == kQuota, "later: quota " << quota_now << ", succeeded " << ran);
  BOOST_TEST(queryInt(db, "SELECT count(*) FROM tasks WHERE status IN ('queued', 'running')") == 0);
  std::map<std::string, int> hooks = receiver.countsByTask();
  for (const std::string& id : tasks) BOOST_TEST(hooks[id] == 1, id << ": " << hooks[id]);
  std::string log = readFile(stack.process("dispatcher")->logPath());
  BOOST_TEST(count(log, "settled a charge eq-api left open") == kSync + kAsync);
}

// 10. Issue 13: eq-api dies after the broker confirmed its async jobs but
// before it closed their open charges (its database step after the confirm
// is held back by a write lock the test takes, then eq-api is SIGKILLed).
// The jobs are in their queues. Version 5 of the schema failed every such
// task as "eq-api stopped before the broker confirmed the job", which was
// false, and the worker then ran the job for nothing. Now:
//   - fast: the worker runs the jobs before the sweep (the test keeps the
//     dead instance's heartbeat fresh until they have succeeded, so the
//     order is certain): the sweep keeps their units ("kept");
//   - standard: the worker is stopped until the sweep, which finds the
//     tasks queued and publishes their jobs again ("republished"); the
//     worker then runs both copies of each.
// Every task succeeds once, is charged once (nothing refunded), gets one
// task.succeeded webhook, and no task is failed.
BOOST_AUTO_TEST_CASE(eq_api_killed_after_the_broker_confirmed_its_jobs_fails_none) {
  constexpr int kEach = 10;
  constexpr int kQuota = 100;
  TaskWebhookReceiver receiver;
  StackOptions o;
  o.worker_modes = {"fast", "standard"};
  Stack stack(o);
  Key key = createKey(stack, "pipeline-api-kill-confirmed",
                      {"--quota-fast", std::to_string(kQuota), "--quota-standard",
                       std::to_string(kQuota), "--rate", "100000"});
  const eq::it::Stack& db = stack;
  Process* fast_worker = stack.process("worker-fast");
  Process* standard_worker = stack.process("worker-standard");
  // Both workers stopped: the jobs stay in their queues, where the test can
  // count them.
  BOOST_REQUIRE(::kill(fast_worker->pid(), SIGSTOP) == 0);
  BOOST_REQUIRE(::kill(standard_worker->pid(), SIGSTOP) == 0);

  // Admitted (charged, task row, open charge with its job) while a memory
  // alarm holds every publish back...
  MemoryAlarm alarm;
  // Every call carries an Idempotency-Key: eq-api cannot record its answer
  // (the database is locked below), so the key's record is settled with the
  // charge, and a retry after the kill must get the same task.
  auto bodyOf = [&](int i) {
    return std::string(R"({"mode":")") + (i < kEach ? "fast" : "standard") +
           R"(","message":"确认之后 )" + std::to_string(i) +
           R"(","reply_count":1,"webhook_url":")" + receiver.url() + "\"}";
  };
  auto call = [&](int i) {
    return eq::it::httpRequest(
        "POST", stack.url("/api/v1/reply/async"),
        {"Authorization: Bearer " + key.api_key, "Content-Type: application/json; charset=utf-8",
         "Idempotency-Key: confirmed-" + std::to_string(i)},
        bodyOf(i));
  };
  std::vector<HttpResult> answers(2 * kEach);  // one slot per caller
  std::vector<std::jthread> callers;
  for (int i = 0; i < 2 * kEach; ++i) {
    callers.emplace_back([&, i] { answers[static_cast<size_t>(i)] = call(i); });
  }
  int64_t until = nowMs() + 10000;
  auto open = [&] {
    return queryInt(db, "SELECT count(*) FROM open_charges WHERE job IS NOT NULL");
  };
  while (open() < 2 * kEach && nowMs() < until) sleepMs(20);
  BOOST_REQUIRE_MESSAGE(open() == 2 * kEach, "every call admitted with its job kept");
  // From here until the fast worker has run its jobs, the test keeps the
  // heartbeat of eq-api's instance fresh, so the sweep cannot come first
  // (eq-api's own beats stop while the database is locked, and with it).
  std::vector<std::string> instances = queryTexts(db, "SELECT id FROM api_instances");
  BOOST_REQUIRE(instances.size() == 1u);
  // (A jthread: a failed assertion below stops and joins it on the way out.)
  std::atomic<int> beats{0}, missed{0};
  std::atomic<int64_t> last_beat_ms{0};  // steady, like nowMs()
  std::unique_ptr<eq::store::Db> beat_db = stack.openDb();
  beat_db->setBusyTimeout(5000);
  std::jthread heart([&](std::stop_token stop) {
    // No assertions on this thread: a beat that fails shows as a sweep that
    // came too early, which the main thread checks.
    while (!stop.stop_requested()) {
      // Unix milliseconds, as eq-api writes them (nowMs() here is steady).
      int64_t unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
      auto r =
          beat_db->exec(eq::store::Sql{"UPDATE api_instances SET heartbeat_at = ? WHERE id = ?"},
                        {unix_ms, std::string_view(instances[0])});
      if (r.isOk() && r.value() == 1) {
        ++beats;
        last_beat_ms = nowMs();
      } else {
        ++missed;
      }
      sleepMs(500);
    }
  });
  // ...then the database is locked and the alarm cleared: the broker
  // confirms every job, and eq-api cannot close a single charge. It answers
  // each call 200 all the same, once its database step has waited
  // EQ_API_DB_WAIT_MS (a 200 means the broker confirmed the job).
  eq::it::DbWriteLock lock(stack);
  alarm.clear();
  for (std::jthread& t : callers) t.join();
  for (const HttpResult& a : answers) BOOST_REQUIRE_MESSAGE(a.status == 200, a.body);
  BOOST_REQUIRE(queryInt(db, "SELECT count(*) FROM idempotency_keys WHERE state = 'pending'") ==
                2 * kEach);
  stack.process("api-0")->kill9();
  lock.release();
  BOOST_REQUIRE(open() == 2 * kEach);
  for (const char* queue : {"eq.jobs.fast", "eq.jobs.standard"}) {
    QueueStats q = waitQueueStats(
        stack, queue, [](const QueueStats& s) { return s.messages == kEach; }, 20000);
    BOOST_REQUIRE_MESSAGE(q.messages == kEach, queue << ": " << q);
  }
  BOOST_REQUIRE(queryInt(db, "SELECT count(*) FROM tasks WHERE status = 'queued'") == 2 * kEach);
  // The dead instance still looks alive: the fast worker runs its jobs
  // before any sweep.
  {
    BOOST_REQUIRE(::kill(fast_worker->pid(), SIGCONT) == 0);
    until = nowMs() + 30000;
    auto fast_done = [&] {
      return queryInt(db,
                      "SELECT count(*) FROM tasks WHERE mode = 'fast' AND status = 'succeeded'");
    };
    while (fast_done() < kEach && nowMs() < until) sleepMs(50);
    BOOST_REQUIRE_MESSAGE(fast_done() == kEach, "the fast jobs ran");
    BOOST_TEST(open() == 2 * kEach, "nothing settled while the heartbeat was fresh");
    heart.request_stop();
    heart.join();
  }
  int64_t heart_stopped = last_beat_ms.load();
  BOOST_TEST_MESSAGE(beats.load() << " heartbeats written for the dead instance, " << missed.load()
                                  << " missed");

  // The sweep: within a minute, nothing left open.
  until = heart_stopped + 60000;
  while (open() > 0 && nowMs() < until) sleepMs(100);
  BOOST_REQUIRE_MESSAGE(open() == 0, open() << " charges still open");
  int64_t settled_after = nowMs() - heart_stopped;
  int64_t beat_to_settle = queryInt(
      db, "SELECT min(settled_at) - (SELECT heartbeat_at FROM api_instances) FROM settlements");
  BOOST_TEST_MESSAGE("settled " << settled_after << " ms after the test's last beat; the first "
                                << "settlement came " << beat_to_settle
                                << " ms after the instance's last heartbeat");
  auto settledAs = [&](const char* mode, const char* action) {
    return queryInt(db, std::string("SELECT count(*) FROM settlements s JOIN tasks t ON "
                                    "t.id = s.task_id WHERE t.mode = '") +
                            mode + "' AND s.action = '" + action + "'");
  };
  BOOST_TEST(settledAs("fast", "kept") == kEach);
  BOOST_TEST(settledAs("standard", "republished") == kEach);
  BOOST_TEST(queryInt(db, "SELECT count(*) FROM settlements") == 2 * kEach);
  std::vector<std::string> reasons =
      queryTexts(db, "SELECT reason FROM settlements WHERE action = 'kept'");
  for (const std::string& r : reasons) {
    BOOST_TEST(r.find("its job reached the broker (the task is succeeded)") != std::string::npos,
               r);
  }
  BOOST_TEST(queryInt(db, "SELECT count(*) FROM tasks WHERE status = 'failed'") == 0);

  // A client that retries with its Idempotency-Key (on a new eq-api, same
  // port) gets the answer it was given, the same task, and is not charged
  // again: the keys were settled with the charges (before, a retry got 409
  // "in progress" for ten minutes, then a second charge).
  stack.spawn("api-1", {"eq-api"}, {{"EQ_HTTP_PORT", std::to_string(stack.apiPort(0))}})
      ->waitForLog("\"msg\":\"listening\"", 10000);
  for (int i = 0; i < 2 * kEach; ++i) {
    HttpResult again = call(i);
    BOOST_TEST(again.status == 200, again.body);
    BOOST_TEST(again.body == answers[static_cast<size_t>(i)].body, "the same task");
    BOOST_TEST(again.headers.count("idempotent-replayed") == 1u);
  }
  BOOST_TEST(queryInt(db, "SELECT count(*) FROM tasks") == 2 * kEach, "no task added");

  // The standard worker runs both copies of each job: its queue held the
  // originals (prefetched by the stopped worker) and the copies.
  BOOST_REQUIRE(::kill(standard_worker->pid(), SIGCONT) == 0);
  std::vector<std::string> tasks = queryTexts(db, "SELECT id FROM tasks");
  BOOST_REQUIRE(tasks.size() == static_cast<size_t>(2 * kEach));
  BOOST_TEST(receiver.waitForAll(tasks, 30000), "every task's webhook arrived");
  QueueStats drained = waitQueueStats(
      stack, "eq.jobs.standard", [](const QueueStats& q) { return q.messages == 0; }, 20000);
  BOOST_TEST(drained.messages == 0, "both copies consumed: " << drained);
  BOOST_TEST(queryInt(db, "SELECT count(*) FROM tasks WHERE status = 'succeeded'") == 2 * kEach);
  // Charged once each: nothing refunded, nothing charged twice (read from
  // the database: eq-api is gone).
  BOOST_TEST(queryInt(db, "SELECT quota_fast FROM accounts") == kQuota - kEach);
  BOOST_TEST(queryInt(db, "SELECT quota_standard FROM accounts") == kQuota - kEach);
  std::map<std::string, int> hooks = receiver.countsByTask();
  for (const std::string& id : tasks) BOOST_TEST(hooks[id] == 1, id << ": " << hooks[id]);
  std::string log = readFile(stack.process("dispatcher")->logPath());
  BOOST_TEST(count(log, "settled a charge eq-api left open") == 2 * kEach);
}

BOOST_AUTO_TEST_SUITE_END()

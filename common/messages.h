// The messages that cross the broker, and the names of the queues they use.
// There is no separate schema: the structs below are the formats, and
// common/messages.cc is the one place that encodes and decodes them, so
// producer and consumer cannot drift (tests/unit/common/messages_test.cc).
// docs/architecture.md describes the messages and their signatures
// (common/msg_auth.h); docs/operations.md, "Topology", the queues.
//
//   eq-api ──async Job──> eq.jobs.<mode> (quorum, durable) ──> eq-worker
//   eq-api ──sync Job──> eq.sync.<mode> | eq.sync.analyze (classic, transient) ──> eq-worker
//   eq-worker ──redelivered sync Job──> eq.jobs.<mode> | eq.jobs.analyze (counted there)
//   eq-worker ──SyncResult──> amq.rabbitmq.reply-to (direct reply-to, correlation_id = request_id)
//   eq-worker ──TaskEvent──> eq.task-events ──> eq-dispatcher
//   work queues ──(rejected, or delivered too often)──> eq.dlx ──> eq.dead ──> eq-dispatcher
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace eq::msg {

constexpr const char* kQueueFast = "eq.jobs.fast";
constexpr const char* kQueueStandard = "eq.jobs.standard";
constexpr const char* kQueuePerfect = "eq.jobs.perfect";
constexpr const char* kQueueAnalyze = "eq.jobs.analyze";
// Sync jobs (replies and analyses) go to classic queues: a caller waits for
// them, nothing about them must survive a broker restart, and a quorum
// queue's Raft log made every one cost about three times the broker work
// (docs/architecture.md, "Queue choice"). Classic queues do not count
// deliveries, so a worker moves a *redelivered* sync job to the quorum queue
// of the same kind, where the delivery limit bounds a job that kills
// workers (workers/worker.cc, Worker::accept).
constexpr const char* kQueueSyncFast = "eq.sync.fast";
constexpr const char* kQueueSyncStandard = "eq.sync.standard";
constexpr const char* kQueueSyncPerfect = "eq.sync.perfect";
constexpr const char* kQueueSyncAnalyze = "eq.sync.analyze";
constexpr const char* kQueueTaskEvents = "eq.task-events";
constexpr const char* kExchangeDead = "eq.dlx";
constexpr const char* kQueueDead = "eq.dead";

// Mode names of the interface; queueForMode("") is the analyze queue.
bool isMode(std::string_view mode);
std::string queueForMode(std::string_view mode);
// The classic queue of a sync job of this mode; syncQueueForMode("") is the
// sync analyze queue.
std::string syncQueueForMode(std::string_view mode);
bool isSyncQueue(std::string_view queue);

struct Job {
  std::string kind;  // "reply" or "analyze"
  std::string request_id;
  std::string task_id;  // async reply only
  std::string mode;     // reply only
  std::string message;
  std::string context;
  std::string scene;
  int reply_count = 1;
  int64_t deadline_ms = 0;  // sync: the caller gives up then (unix ms); async: 0
};

std::string encodeJob(const Job& job);
// Rejects anything that is not a job we would have produced.
Result<Job> decodeJob(std::string_view body);
// The task id of a job that decodeJob refused, read as leniently as the
// JSON allows (no encoding check, no other field required): a job that no
// worker could decode must still end its task (failed, refunded, webhook)
// rather than vanish. Empty when the body names no plausible task id.
std::string salvageTaskId(std::string_view body);

// The reply a worker sends back for a sync job: either data (the `data` of
// the HTTP response, as JSON text) or an error code and message.
struct SyncResult {
  bool ok = false;
  std::string data_json;
  int code = 0;
  std::string msg;
  int64_t tokens_used = 0;  // data's tokens_used (decode fills it; not encoded separately)
};

std::string encodeSyncResult(const SyncResult& r);
Result<SyncResult> decodeSyncResult(std::string_view body);

// One transition of an async task, reported by the worker that made it.
struct TaskEvent {
  std::string event;  // task.running | task.succeeded | task.failed
  std::string task_id;
  std::string request_id;
  std::string mode;
  int64_t at_ms = 0;
  std::string result_json;  // task.succeeded: ReplyResponse data
  int error_code = 0;       // task.failed
  std::string error_msg;
};

std::string encodeTaskEvent(const TaskEvent& e);
Result<TaskEvent> decodeTaskEvent(std::string_view body);

}  // namespace eq::msg

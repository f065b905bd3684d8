// The closed sets of the interface as enums, each with one parse/name pair:
// the reply modes, the task and delivery states and the job kinds. The
// strings are what the HTTP API, the AMQP messages and the database hold;
// the SQL CHECK constraints on tasks.mode, tasks.status and
// deliveries.status (001_init.sql) list the same names, so a value none of these parse functions
// accepts cannot be stored either (tests/unit/common/enums_test.cc checks both sides).
//
// Plain values and free functions: no state, any thread.
#pragma once

#include <iosfwd>
#include <optional>
#include <string_view>

namespace eq {

enum class Mode { kFast, kStandard, kPerfect };
std::optional<Mode> parseMode(std::string_view s);
const char* modeName(Mode m);
inline bool isModeName(std::string_view s) { return parseMode(s).has_value(); }

// The task state machine: queued -> running -> succeeded | failed (a queued
// task may also fail at once). Each transition is one Store function.
enum class TaskStatus { kQueued, kRunning, kSucceeded, kFailed };
std::optional<TaskStatus> parseTaskStatus(std::string_view s);
const char* taskStatusName(TaskStatus s);
// Its name, for logs and test messages.
std::ostream& operator<<(std::ostream& out, TaskStatus s);

// A webhook delivery: pending (due again at its next attempt) until a 2xx
// makes it delivered or its last attempt failed; a replay makes a final one
// pending again.
enum class DeliveryStatus { kPending, kDelivered, kFailed };
std::optional<DeliveryStatus> parseDeliveryStatus(std::string_view s);
const char* deliveryStatusName(DeliveryStatus s);
std::ostream& operator<<(std::ostream& out, DeliveryStatus s);

enum class JobKind { kReply, kAnalyze };
std::optional<JobKind> parseJobKind(std::string_view s);
const char* jobKindName(JobKind k);

}  // namespace eq

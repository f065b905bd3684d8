#include "common/enums.h"

#include <ostream>

namespace eq {

std::optional<Mode> parseMode(std::string_view s) {
  if (s == "fast") return Mode::kFast;
  if (s == "standard") return Mode::kStandard;
  if (s == "perfect") return Mode::kPerfect;
  return std::nullopt;
}

const char* modeName(Mode m) {
  switch (m) {
    case Mode::kFast: return "fast";
    case Mode::kStandard: return "standard";
    case Mode::kPerfect: return "perfect";
  }
  return "fast";  // unreachable: every enumerator is named above
}

std::optional<TaskStatus> parseTaskStatus(std::string_view s) {
  if (s == "queued") return TaskStatus::kQueued;
  if (s == "running") return TaskStatus::kRunning;
  if (s == "succeeded") return TaskStatus::kSucceeded;
  if (s == "failed") return TaskStatus::kFailed;
  return std::nullopt;
}

const char* taskStatusName(TaskStatus s) {
  switch (s) {
    case TaskStatus::kQueued: return "queued";
    case TaskStatus::kRunning: return "running";
    case TaskStatus::kSucceeded: return "succeeded";
    case TaskStatus::kFailed: return "failed";
  }
  return "queued";  // unreachable
}

std::ostream& operator<<(std::ostream& out, TaskStatus s) { return out << taskStatusName(s); }

std::optional<DeliveryStatus> parseDeliveryStatus(std::string_view s) {
  if (s == "pending") return DeliveryStatus::kPending;
  if (s == "delivered") return DeliveryStatus::kDelivered;
  if (s == "failed") return DeliveryStatus::kFailed;
  return std::nullopt;
}

const char* deliveryStatusName(DeliveryStatus s) {
  switch (s) {
    case DeliveryStatus::kPending:
      return "pending";
    case DeliveryStatus::kDelivered:
      return "delivered";
    case DeliveryStatus::kFailed:
      return "failed";
  }
  return "pending";  // unreachable
}

std::ostream& operator<<(std::ostream& out, DeliveryStatus s) {
  return out << deliveryStatusName(s);
}

std::optional<JobKind> parseJobKind(std::string_view s) {
  if (s == "reply") return JobKind::kReply;
  if (s == "analyze") return JobKind::kAnalyze;
  return std::nullopt;
}

const char* jobKindName(JobKind k) {
  switch (k) {
    case JobKind::kReply: return "reply";
    case JobKind::kAnalyze: return "analyze";
  }
  return "reply";  // unreachable
}

}  // namespace eq

#include "dispatcher/settler.h"

#include <algorithm>
#include <chrono>

#include "common/defaults.h"
#include "common/log.h"
#include "common/messages.h"
#include "common/msg_auth.h"
#include "dispatcher/db_writes.h"

namespace eq::dispatch {

int ChargeSettler::step(int64_t now_ms) {
  if (now_ms < next_run_ms_) return 0;
  next_run_ms_ = now_ms + opts_.interval_ms;
  store::Transaction tx = store_.transaction();
  if (!tx.status().isOk()) {
    emit([error = tx.status().msg()] {
      log::warn("charge settler: database busy; next sweep later", {{"error", error}});
    });
    return 0;
  }
  Result<std::vector<Settlement>> settled =
      store_.settleOrphanedCharges(now_ms, opts_.stale_ms, opts_.grace_ms);
  Status s = settled.status();
  // A failed task with a webhook gets its task.failed delivery in the same
  // transaction, as the consumer thread does for any failed task.
  if (s.isOk()) {
    for (const Settlement& st : settled.value()) {
      if (!st.task_changed) continue;
      Result<std::optional<TaskRecord>> task = store_.task(st.charge.task_id);
      if (!task.isOk()) {
        s = task.status();
        break;
      }
      if (!task.value() || task.value()->webhook_url.empty()) continue;
      Result<DeliveryRecord> d =
          store_.createDelivery(st.charge.task_id, task.value()->webhook_url, "task.failed", now_ms);
      if (!d.isOk()) {
        s = d.status();
        break;
      }
    }
  }
  if (s.isOk()) {
    Result<int> purged =
        store_.purgeSettlementsBefore(now_ms - opts_.settlement_retention_ms, 500);
    s = purged.status();
  }
  if (s.isOk()) s = tx.commit();  // else rolled back by tx, before the next sweep
  if (!s.isOk()) {
    emit([error = s.msg()] {
      log::error("charge settler: sweep rolled back; retried at the next one",
                 {{"error", error}});
    });
    return 0;
  }
  for (const Settlement& st : settled.value()) {
    emit([st] {
      log::warn("settled a charge eq-api left open",
                {{"request_id", st.charge.request_id},
                 {"instance", st.charge.instance_id},
                 {"account_id", st.charge.account_id},
                 {"mode", st.charge.mode},
                 {"task_id", st.charge.task_id},
                 {"action", st.action},
                 {"reason", st.reason}});
    });
  }
  auto n = static_cast<int>(settled.value().size());
  settled_total_ += n;
  return n;
}

namespace {

// Jobs published again per sweep at most, and how long one publish may wait
// for its confirm (eq-api waits as long for its own).
constexpr int kRepublishBatch = 100;
constexpr int kConfirmTimeoutMs = 3'000;
// How long a sweep's claim on its jobs lasts. The sweep connects before it
// claims and stops publishing kRepublishLeaseMarginMs before the lease
// ends, so that only a dispatcher that died mid-sweep leaves its jobs to
// wait for the lease.
constexpr int64_t kRepublishLeaseMs = 30'000;
// What of the lease is left when a sweep stops publishing: more than one
// publish's confirm timeout and the settlement after it.
constexpr int64_t kRepublishLeaseMarginMs = 10'000;
// The longest wait between sweeps while the broker cannot be reached or
// does not confirm.
constexpr int64_t kMaxBackoffMs = 60'000;

}  // namespace

bool JobRepublisher::connected() {
  if (conn_ != nullptr && !conn_->broken()) return true;
  conn_.reset();
  Result<std::unique_ptr<amqp::Connection>> c = amqp::Connection::open(
      amqp_url_, "eq-dispatcher republisher", defaults::kAmqpHeartbeatSeconds, &first_broker_);
  if (!c.isOk()) {
    log::warn("job republisher: broker not reachable; next sweep later",
              {{"error", c.status().msg()}});
    return false;
  }
  if (Status s = c.value()->enableConfirms(); !s.isOk()) {
    log::warn("job republisher: confirms not enabled; next sweep later", {{"error", s.msg()}});
    return false;
  }
  conn_ = std::move(c).value();
  return true;
}

void JobRepublisher::handBack(const std::set<std::string>& request_ids, int64_t lease_until_ms) {
  if (request_ids.empty()) return;
  std::unique_lock<std::mutex> gate = lockDbWrites(db_writes_);
  if (Status s =
          store_.releaseOrphanedJobs({request_ids.begin(), request_ids.end()}, lease_until_ms);
      !s.isOk()) {
    log::warn("job republisher: claims not handed back; they end with their lease",
              {{"error", s.msg()}, {"jobs", static_cast<long long>(request_ids.size())}});
  }
}

void JobRepublisher::backOff(int64_t now_ms) {
  backoff_ms_ = std::min(kMaxBackoffMs, std::max(opts_.interval_ms, backoff_ms_ * 2));
  next_run_ms_ = now_ms + backoff_ms_;
}

int JobRepublisher::step(int64_t now_ms) {
  if (now_ms < next_run_ms_) return 0;
  next_run_ms_ = now_ms + opts_.interval_ms;
  // A read, outside the gate: almost every sweep finds nothing.
  Result<bool> any = store_.anyOrphanedJob(now_ms, opts_.stale_ms, opts_.grace_ms);
  if (!any.isOk()) {
    log::warn("job republisher: orphaned jobs not read; next sweep later",
              {{"error", any.status().msg()}});
    return 0;
  }
  if (!any.value()) {
    // Nothing to publish: the connection is not kept open for nothing.
    conn_.reset();
    refusals_.clear();
    return 0;
  }
  // Connected before claiming: a claim is taken only by a sweep that can
  // publish at once (opening a connection may take the lease's length).
  if (!connected()) {
    backOff(now_ms);
    return 0;
  }
  // The jobs are claimed (a lease each), so that several dispatchers do not
  // all publish the same one; what this sweep does not settle it hands back
  // at the end, to be taken again at a later sweep.
  const int64_t lease_until = now_ms + kRepublishLeaseMs;
  Result<std::vector<OpenCharge>> claimed = [&] {
    std::unique_lock<std::mutex> gate = lockDbWrites(db_writes_);
    return store_.claimOrphanedJobs(now_ms, opts_.stale_ms, opts_.grace_ms, lease_until,
                                    kRepublishBatch);
  }();
  if (!claimed.isOk()) {
    log::warn("job republisher: orphaned jobs not claimed; next sweep later",
              {{"error", claimed.status().msg()}});
    return 0;
  }
  std::set<std::string> unsettled;  // empty: another dispatcher has them
  for (const OpenCharge& c : claimed.value()) unsettled.insert(c.request_id);
  int n = publishClaimed(claimed.value(), now_ms, unsettled);
  handBack(unsettled, lease_until);
  return n;
}

int JobRepublisher::publishClaimed(const std::vector<OpenCharge>& claimed, int64_t now_ms,
                                   std::set<std::string>& unsettled) {
  std::vector<const OpenCharge*> confirmed;
  std::vector<const OpenCharge*> refused;  // kMaxRefusals times: given up
  // Publishing stops well inside the lease (each publish may wait out its
  // confirm timeout): past it another dispatcher may take the same jobs.
  const auto stop_at = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(kRepublishLeaseMs - kRepublishLeaseMarginMs);
  for (const OpenCharge& c : claimed) {
    if (std::chrono::steady_clock::now() > stop_at) {
      log::warn("job republisher: the sweep ran out of its claim's time; the rest next sweep",
                {{"published", static_cast<long long>(confirmed.size())}});
      break;
    }
    amqp::PublishOptions opts;
    opts.persistent = true;
    opts.signature = msg::signMessage(internal_key_, msg::SignedKind::kJob, "", c.job);
    Status s = conn_->publishConfirmed(msg::queueForMode(c.mode), c.job, opts, kConfirmTimeoutMs);
    if (s.isOk()) {
      confirmed.push_back(&c);
      refusals_.erase(c.request_id);
      continue;
    }
    if (conn_->broken()) {
      // Blocked by an alarm or gone: what was confirmed so far is settled
      // below, the rest waits for a later sweep.
      log::warn("job republisher: publishing failed; next sweep later", {{"error", s.msg()}});
      conn_.reset();
      backOff(now_ms);
      break;
    }
    int& n = refusals_[c.request_id];
    if (++n >= kMaxRefusals) {
      refused.push_back(&c);
    } else {
      log::warn("job republisher: the broker refused a job; retried at the next sweep",
                {{"request_id", c.request_id}, {"task_id", c.task_id}, {"error", s.msg()}});
    }
  }
  if (conn_ != nullptr) backoff_ms_ = 0;
  if (confirmed.empty() && refused.empty()) return 0;
  const std::string give_up = "the broker refused its job " + std::to_string(kMaxRefusals) +
                              " times when it was published again";
  std::vector<std::pair<const OpenCharge*, const char*>> settled;
  Status s = [&] {
    std::unique_lock<std::mutex> gate = lockDbWrites(db_writes_);
    store::Transaction tx = store_.transaction();
    if (!tx.status().isOk()) return tx.status();
    // The accounts' locks before the charges' rows, in the order every
    // writer of accounts takes them (Store::lockAccounts): a refused job's
    // settlement refunds its account, and an eq-api batch holding that
    // account's lock may be closing the same charge.
    std::vector<std::string> accounts;
    for (const auto* list : {&confirmed, &refused}) {
      for (const OpenCharge* c : *list) accounts.push_back(c->account_id);
    }
    if (Status l = store_.lockAccounts(accounts); !l.isOk()) {
      // As eq-api's batches do: without the locks rather than not at all
      // (a timeout here means a busy account, not a broken database).
      log::warn("job republisher: account locks not taken; its settlements go on without them",
                {{"error", l.msg()}});
    }
    for (const OpenCharge* c : confirmed) {
      Result<bool> r = store_.settleRepublished(*c, now_ms);
      if (!r.isOk()) return r.status();  // rolled back by tx
      // false: eq-api (alive after all) or the settler closed it first; the
      // copy just published is a duplicate, which changes nothing.
      if (r.value()) settled.emplace_back(c, "republished");
    }
    for (const OpenCharge* c : refused) {
      Result<bool> r = store_.settleUnpublishable(*c, now_ms, give_up);
      if (!r.isOk()) return r.status();  // rolled back by tx
      if (r.value()) settled.emplace_back(c, "task_failed");
    }
    return tx.commit();
  }();
  if (!s.isOk()) {
    // The jobs are in the queue; their charges stay open and the next sweep
    // publishes them again (one more duplicate each).
    log::error("job republisher: settlements rolled back; retried at the next sweep",
               {{"error", s.msg()}});
    return 0;
  }
  for (const OpenCharge* c : confirmed) unsettled.erase(c->request_id);
  for (const OpenCharge* c : refused) {
    refusals_.erase(c->request_id);
    unsettled.erase(c->request_id);
  }
  for (const auto& [c, action] : settled) {
    log::warn("settled a charge eq-api left open",
              {{"request_id", c->request_id},
               {"instance", c->instance_id},
               {"account_id", c->account_id},
               {"mode", c->mode},
               {"task_id", c->task_id},
               {"action", action},
               {"reason", std::string_view(action) == "republished"
                              ? "whether its job reached the broker is unknown: published again"
                              : give_up}});
  }
  auto n = static_cast<int>(settled.size());
  settled_total_ += n;
  return n;
}

}  // namespace eq::dispatch

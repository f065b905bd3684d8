// One AMQP 0-9-1 connection to RabbitMQ through rabbitmq-c, with one channel.
//
// Ownership and threads: an AmqpConnection owns its amqp_connection_state_t
// and socket and must be used by one thread only (rabbitmq-c is not
// thread-safe per connection). Workers and the dispatcher use it from their
// one consumer thread; eq-api gives it a thread of its own (api/broker_bridge.h)
// because rabbitmq-c may block in publish and only services heartbeats inside
// its own calls, which a libuv loop thread cannot afford.
//
// Errors are values. Any error that leaves the connection unusable sets
// broken(); the owner then destroys the object and reconnects with backoff.
// Destruction closes the channel and connection politely if still possible.
#pragma once

#include <amqp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"

namespace eq::amqp {

struct PublishOptions {
  std::string correlation_id;
  std::string reply_to;
  std::string message_id;
  int64_t expiration_ms = 0;  // 0: never expires in the queue
  bool persistent = false;
  // Sent as the x-eq-signature header when not empty (common/msg_auth.h).
  std::string signature;
};

struct Delivery {
  uint64_t tag = 0;
  std::string queue_hint;  // routing key it was published with
  std::string body;
  std::string correlation_id;
  std::string reply_to;
  bool redelivered = false;
  int64_t delivery_count = 0;  // quorum queues: x-delivery-count header
  std::string death_reason;    // dead-lettered messages: x-first-death-reason
  std::string signature;       // x-eq-signature, empty when absent (common/msg_auth.h)
};

// The broker's answer to a publish once confirms are enabled.
struct Confirm {
  uint64_t tag = 0;
  bool multiple = false;
  bool ack = true;  // false: basic.nack, the broker did not take the message
};

struct Timeout {};
using Event = std::variant<Timeout, Delivery, Confirm>;

class Connection {
 public:
  // Connects, logs in and opens channel 1. conn_name shows in the RabbitMQ
  // management UI's connection list.
  //
  // `url` may list several brokers, comma-separated (the nodes of a
  // cluster): they are tried in turn, starting with *first_to_try, so a
  // reconnect after a node stops lands on a live one at once (a stopped
  // node refuses the connection in microseconds; a hung one costs its
  // connect or handshake timeout). The error names every address.
  // *first_to_try, kept by the caller across its reconnects (one per
  // connection it maintains; nullptr: start with the first address), is
  // updated to the address reached, or after a failed round to the one
  // after the round's first, so a hung broker is not waited on first every
  // time.
  static Result<std::unique_ptr<Connection>> open(const std::string& url,
                                                  const std::string& conn_name,
                                                  int heartbeat_seconds,
                                                  std::size_t* first_to_try = nullptr);
  // The addresses of a comma-separated EQ_AMQP_URL, trimmed; empty entries
  // are dropped.
  static std::vector<std::string> splitUrls(const std::string& urls);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Makes sure every exchange and queue of messages.h exists; every process
  // calls it on every (re)connect. It first checks them passively, which
  // takes no permission: the per-role broker users (eq-api, eq-worker,
  // eq-dispatcher) may not declare anything, and an administrator declares
  // the topology beforehand (deploy/rabbitmq/definitions.sh). Only when
  // something is missing does it declare everything, which works for a user
  // with the configure permission (the administrator `eq`) and otherwise
  // fails with ACCESS_REFUSED.
  Status declareTopology();
  // RabbitMQ's direct reply-to pseudo-queue: consume it (no_ack) on the
  // channel that publishes requests with reply_to set to this name.
  static constexpr const char* kDirectReplyTo = "amq.rabbitmq.reply-to";
  Status qos(uint16_t prefetch);
  // no_ack: the broker forgets each delivery as it sends it (direct
  // reply-to requires it; see api/broker_bridge.h).
  Status consume(const std::string& queue, bool no_ack = false);
  // Stops every consumer of this connection (graceful shutdown); unacked
  // deliveries stay ours until acked or rejected.
  Status cancelAll();
  Status enableConfirms();

  // Publishes to the default exchange. With confirms on, returns the
  // publish's sequence number, which a later Confirm event refers to.
  Result<uint64_t> publish(const std::string& routing_key, const std::string& body,
                           const PublishOptions& opts);
  // Publishes and waits until the broker confirms it (or timeout). Deliveries
  // that arrive meanwhile are kept and returned by later next() calls.
  Status publishConfirmed(const std::string& routing_key, const std::string& body,
                          const PublishOptions& opts, int timeout_ms);

  // Waits up to timeout_ms for the next delivery or confirm (0: poll only).
  // Also keeps heartbeats flowing, so call it at least every few seconds.
  Result<Event> next(int timeout_ms);

  // multiple: also every unacked delivery with a lower tag on this channel.
  Status ack(uint64_t tag, bool multiple = false);
  // requeue=false dead-letters the message through eq.dlx.
  Status reject(uint64_t tag, bool requeue);

  int fd() const;

  // Holds what is sent on the connection while it lives (TCP_CORK) and
  // sends it, in as few segments as fit, when it ends. rabbitmq-c writes
  // each publish as three frames and each frame with its own send(): around
  // a batch of publishes and acks, corking turns a segment per frame into a
  // segment per ~64 KiB, which both this process's network stack and the
  // broker's reads pay per segment. Scope it to work that does not wait:
  // the kernel sends corked bytes after 200 ms regardless.
  class Cork {
   public:
    explicit Cork(const Connection& c);
    ~Cork();
    Cork(const Cork&) = delete;
    Cork& operator=(const Cork&) = delete;

   private:
    int fd_;
  };

  // True when rabbitmq-c holds bytes or frames already read from the socket,
  // or publishConfirmed() kept deliveries for next(): polling the fd would
  // miss them.
  bool hasBuffered() const;
  bool broken() const { return broken_; }

 private:
  // One broker address.
  static Result<std::unique_ptr<Connection>> openOne(const std::string& url,
                                                     const std::string& conn_name,
                                                     int heartbeat_seconds);
  explicit Connection(amqp_connection_state_t conn) : conn_(conn) {}
  Status rpcStatus(const char* what);
  Status libStatus(int rc, const char* what);
  Result<Event> readOneFrame(int timeout_ms);
  // The passive check of declareTopology; an error closes the channel.
  Status checkTopology();
  // After a channel exception: acknowledges the close and opens it again.
  Status reopenChannel();
  // Declares (and binds) everything, idempotently; needs configure.
  Status declareAll();

  amqp_connection_state_t conn_;
  bool broken_ = false;
  bool cluster_ = false;  // opened from several addresses: sync queues are quorum
  bool confirms_ = false;
  uint64_t next_publish_seq_ = 1;
  std::deque<Event> pending_;  // events read while waiting for a confirm
  std::vector<std::string> consumer_tags_;
};

// The connect-serve-reconnect loop of the processes that hold one broker
// connection on a thread of their own (eq-worker, eq-dispatcher): connects
// as `conn_name`, runs `serve` on the connection until it returns (the
// connection is lost, or `stop` was set), calls `lost` with what serve
// returned, and connects again after common/reconnect.h's backoff, until
// `stop` is set (a signal handler sets it). A failed connect is logged and
// retried the same way.
void serveUntilStopped(const std::string& url, const std::string& conn_name,
                       const std::atomic<bool>& stop,
                       const std::function<Status(Connection&)>& serve,
                       const std::function<void(const Status&)>& lost);

}  // namespace eq::amqp

#include "common/amqp.h"

#include <amqp_tcp_socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstring>
#include <vector>

#include "common/defaults.h"
#include "common/log.h"
#include "common/messages.h"
#include "common/msg_auth.h"
#include "common/reconnect.h"
#include "common/timefmt.h"

namespace eq::amqp {
namespace {

constexpr amqp_channel_t kChannel = 1;

amqp_bytes_t bytes(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

std::string str(amqp_bytes_t b) { return std::string(static_cast<const char*>(b.bytes), b.len); }

// Work queues are quorum queues: replicated and durable, they count
// deliveries, so a job that keeps killing workers is dead-lettered instead
// of looping forever. x-delivery-limit counts *re*deliveries: with 2, the
// third failed delivery dead-letters the message (docs/contract.md §5: its
// task is failed). Measured, not assumed:
// tests/integration/pipeline_test.cc (case 4) SIGKILLs the worker holding a
// job until the job's task fails and expects exactly 3 kills (RabbitMQ
// 3.10), so a broker whose counting differs fails that test.
constexpr int64_t kDeliveryLimit = 2;

}  // namespace

std::vector<std::string> Connection::splitUrls(const std::string& urls) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= urls.size()) {
    std::size_t end = urls.find(',', start);
    if (end == std::string::npos) end = urls.size();
    std::string one = urls.substr(start, end - start);
    while (!one.empty() && (one.front() == ' ' || one.front() == '\t')) one.erase(0, 1);
    while (!one.empty() && (one.back() == ' ' || one.back() == '\t')) one.pop_back();
    if (!one.empty()) out.push_back(std::move(one));
    start = end + 1;
  }
  return out;
}

Result<std::unique_ptr<Connection>> Connection::open(const std::string& urls,
                                                     const std::string& conn_name,
                                                     int heartbeat_seconds,
                                                     std::size_t* first_to_try) {
  std::vector<std::string> list = splitUrls(urls);
  if (list.empty()) return Status(500, "EQ_AMQP_URL is empty");
  if (list.size() == 1) return openOne(list[0], conn_name, heartbeat_seconds);
  // Several addresses: the nodes of one cluster (declareTopology's queue
  // types depend on it).
  std::size_t first = first_to_try != nullptr ? *first_to_try % list.size() : 0;
  std::string errors;
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::size_t at = (first + i) % list.size();
    Result<std::unique_ptr<Connection>> c = openOne(list[at], conn_name, heartbeat_seconds);
    if (c.isOk()) {
      if (first_to_try != nullptr) *first_to_try = at;
      c.value()->cluster_ = true;
      return c;
    }
    if (c.status().code() == 500) return c.status();  // a malformed URL: no use trying others
    errors += (errors.empty() ? "" : "; ") + c.status().msg();
  }
  if (first_to_try != nullptr) *first_to_try = (first + 1) % list.size();
  return Status(503, "amqp: no broker reachable: " + errors);
}

Result<std::unique_ptr<Connection>> Connection::openOne(const std::string& url,
                                                        const std::string& conn_name,
                                                        int heartbeat_seconds) {
  std::vector<char> buf(url.begin(), url.end());
  buf.push_back('\0');
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(buf.data(), &info) != AMQP_STATUS_OK) {
    return Status(500, "EQ_AMQP_URL is not a valid amqp:// URL");
  }
  // By the AMQP URI spec "amqp://host/" names the empty vhost and only
  // "%2f" names "/". RabbitMQ never has an empty vhost, while a trailing
  // slash is what nearly everyone writes, so we read it as the default "/".
  char default_vhost[] = "/";
  if (info.vhost == nullptr || *info.vhost == '\0') info.vhost = default_vhost;
  amqp_connection_state_t conn = amqp_new_connection();
  std::unique_ptr<Connection> c(new Connection(conn));
  // Bound the handshake and every synchronous method: a broker that accepts
  // TCP but does not answer (booting, overloaded) must not wedge a thread.
  struct timeval rpc_timeout = {defaults::kAmqpRpcTimeoutMs / 1000,
                                (defaults::kAmqpRpcTimeoutMs % 1000) * 1000};
  amqp_set_handshake_timeout(conn, &rpc_timeout);
  amqp_set_rpc_timeout(conn, &rpc_timeout);
  amqp_socket_t* sock = amqp_tcp_socket_new(conn);
  if (sock == nullptr) return Status(503, "amqp: cannot create socket");
  struct timeval tv = {5, 0};
  int rc = amqp_socket_open_noblock(sock, info.host, info.port, &tv);
  if (rc != AMQP_STATUS_OK) {
    c->broken_ = true;
    return Status(503, std::string("amqp: cannot connect to ") + info.host + ":" +
                           std::to_string(info.port) + ": " + amqp_error_string2(rc));
  }
  // consumer_cancel_notify: when a queue we consume is deleted (in a
  // cluster, a transient queue whose node stopped) the broker says so with
  // basic.cancel instead of leaving the consumer silently idle; next()
  // then reports the connection broken and its owner reconnects and
  // re-declares the queue on a live node.
  amqp_table_entry_t caps[1];
  caps[0].key = amqp_cstring_bytes("consumer_cancel_notify");
  caps[0].value.kind = AMQP_FIELD_KIND_BOOLEAN;
  caps[0].value.value.boolean = 1;
  amqp_table_entry_t props[2];
  props[0].key = amqp_cstring_bytes("connection_name");
  props[0].value.kind = AMQP_FIELD_KIND_UTF8;
  props[0].value.value.bytes = bytes(conn_name);
  props[1].key = amqp_cstring_bytes("capabilities");
  props[1].value.kind = AMQP_FIELD_KIND_TABLE;
  props[1].value.value.table = amqp_table_t{1, caps};
  amqp_table_t client_props = {2, props};
  amqp_rpc_reply_t login = amqp_login_with_properties(
      conn, info.vhost, 0, AMQP_DEFAULT_FRAME_SIZE, heartbeat_seconds, &client_props,
      AMQP_SASL_METHOD_PLAIN, info.user, info.password);
  if (login.reply_type != AMQP_RESPONSE_NORMAL) {
    c->broken_ = true;
    return Status(503, "amqp: login failed (check EQ_AMQP_URL user and password)");
  }
  amqp_channel_open(conn, kChannel);
  if (Status s = c->rpcStatus("channel.open"); !s.isOk()) return s;
  return c;
}

Connection::~Connection() {
  if (!broken_) {
    amqp_channel_close(conn_, kChannel, AMQP_REPLY_SUCCESS);
    amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  }
  amqp_destroy_connection(conn_);
}

Status Connection::rpcStatus(const char* what) {
  amqp_rpc_reply_t r = amqp_get_rpc_reply(conn_);
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return Status::ok();
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
      broken_ = true;
      return Status(503, std::string("amqp ") + what + ": " + amqp_error_string2(r.library_error));
    case AMQP_RESPONSE_SERVER_EXCEPTION: {
      // A channel or connection exception closes the channel at least; we
      // treat both as fatal for this connection and let the owner reconnect.
      broken_ = true;
      std::string text = "server closed the channel";
      if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
        text = str(m->reply_text);
      } else if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        auto* m = static_cast<amqp_connection_close_t*>(r.reply.decoded);
        text = str(m->reply_text);
      }
      return Status(503, std::string("amqp ") + what + ": " + text);
    }
    default:
      broken_ = true;
      return Status(503, std::string("amqp ") + what + ": no reply");
  }
}

Status Connection::libStatus(int rc, const char* what) {
  if (rc == AMQP_STATUS_OK) return Status::ok();
  broken_ = true;
  return Status(503, std::string("amqp ") + what + ": " + amqp_error_string2(rc));
}

Status Connection::declareTopology() {
  Status present = checkTopology();
  if (present.isOk()) return present;
  // Something is missing (NOT_FOUND closed the channel): declare it all,
  // which takes the configure permission. The per-role users have none
  // (deploy/rabbitmq/definitions.sh), so for them this fails with
  // ACCESS_REFUSED and the message says what to do.
  if (Status s = reopenChannel(); !s.isOk()) return s;
  Status declared = declareAll();
  if (!declared.isOk() && declared.msg().find("ACCESS_REFUSED") != std::string::npos) {
    return Status(declared.code(), declared.msg() + "; " + present.msg() +
                                       ": an administrator declares the topology "
                                       "(deploy/rabbitmq/definitions.sh)");
  }
  return declared;
}

Status Connection::checkTopology() {
  // Passive declares need no permission at all (RabbitMQ checks none for
  // them), only that the names exist; arguments are not compared.
  amqp_exchange_declare(conn_, kChannel, amqp_cstring_bytes(msg::kExchangeDead),
                        amqp_cstring_bytes("fanout"), 1, 0, 0, 0, amqp_empty_table);
  if (Status s = rpcStatus("check eq.dlx"); !s.isOk()) return s;
  for (const char* q : {msg::kQueueDead, msg::kQueueFast, msg::kQueueStandard, msg::kQueuePerfect,
                        msg::kQueueAnalyze, msg::kQueueTaskEvents, msg::kQueueSyncFast,
                        msg::kQueueSyncStandard, msg::kQueueSyncPerfect, msg::kQueueSyncAnalyze}) {
    amqp_queue_declare(conn_, kChannel, amqp_cstring_bytes(q), 1, 0, 0, 0, amqp_empty_table);
    if (Status s = rpcStatus("check queue"); !s.isOk()) {
      return Status(s.code(), s.msg() + " (" + q + ")");
    }
  }
  return Status::ok();
}

Status Connection::reopenChannel() {
  // The broker closed the channel with an exception and waits for our
  // close-ok before the channel number can be opened again.
  amqp_channel_close_ok_t close_ok{};
  if (int rc = amqp_send_method(conn_, kChannel, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok);
      rc != AMQP_STATUS_OK) {
    return libStatus(rc, "channel.close-ok");
  }
  broken_ = false;
  amqp_channel_open(conn_, kChannel);
  return rpcStatus("channel.open");
}

Status Connection::declareAll() {
  amqp_exchange_declare(conn_, kChannel, amqp_cstring_bytes(msg::kExchangeDead),
                        amqp_cstring_bytes("fanout"), 0, 1, 0, 0, amqp_empty_table);
  if (Status s = rpcStatus("declare eq.dlx"); !s.isOk()) return s;

  amqp_table_entry_t quorum_only[1];
  quorum_only[0].key = amqp_cstring_bytes("x-queue-type");
  quorum_only[0].value.kind = AMQP_FIELD_KIND_UTF8;
  quorum_only[0].value.value.bytes = amqp_cstring_bytes("quorum");
  amqp_table_t dead_args = {1, quorum_only};
  amqp_queue_declare(conn_, kChannel, amqp_cstring_bytes(msg::kQueueDead), 0, 1, 0, 0, dead_args);
  if (Status s = rpcStatus("declare eq.dead"); !s.isOk()) return s;
  amqp_queue_bind(conn_, kChannel, amqp_cstring_bytes(msg::kQueueDead),
                  amqp_cstring_bytes(msg::kExchangeDead), amqp_empty_bytes, amqp_empty_table);
  if (Status s = rpcStatus("bind eq.dead"); !s.isOk()) return s;

  amqp_table_entry_t work[3];
  work[0] = quorum_only[0];
  work[1].key = amqp_cstring_bytes("x-delivery-limit");
  work[1].value.kind = AMQP_FIELD_KIND_I64;
  work[1].value.value.i64 = kDeliveryLimit;
  work[2].key = amqp_cstring_bytes("x-dead-letter-exchange");
  work[2].value.kind = AMQP_FIELD_KIND_UTF8;
  work[2].value.value.bytes = amqp_cstring_bytes(msg::kExchangeDead);
  amqp_table_t work_args = {3, work};
  for (const char* q : {msg::kQueueFast, msg::kQueueStandard, msg::kQueuePerfect,
                        msg::kQueueAnalyze, msg::kQueueTaskEvents}) {
    amqp_queue_declare(conn_, kChannel, amqp_cstring_bytes(q), 0, 1, 0, 0, work_args);
    if (Status s = rpcStatus("declare work queue"); !s.isOk()) {
      return Status(s.code(), s.msg() + " (" + q + ")");
    }
  }

  // Sync job queues: classic and durable on one broker (the queue outlives
  // a broker restart; its transient messages do not, and their callers have
  // had a 503 by then). On a cluster (several addresses in EQ_AMQP_URL) they
  // are quorum queues: a classic queue lives on one node, and while that
  // node is down it can be neither used nor declared anywhere else, which
  // would stop every process's (re)connect; a quorum queue elects a new
  // leader and its consumers carry on. No dead-letter exchange either way:
  // a sync job that expires (its caller had its 504) is simply dropped; one
  // that was redelivered is moved by the worker to the counting quorum queue
  // above.
  amqp_table_entry_t sync_type[1];
  sync_type[0].key = amqp_cstring_bytes("x-queue-type");
  sync_type[0].value.kind = AMQP_FIELD_KIND_UTF8;
  sync_type[0].value.value.bytes = amqp_cstring_bytes(cluster_ ? "quorum" : "classic");
  amqp_table_t sync_args = {1, sync_type};
  for (const char* q : {msg::kQueueSyncFast, msg::kQueueSyncStandard, msg::kQueueSyncPerfect,
                        msg::kQueueSyncAnalyze}) {
    amqp_queue_declare(conn_, kChannel, amqp_cstring_bytes(q), 0, 1, 0, 0, sync_args);
    if (Status s = rpcStatus("declare sync queue"); !s.isOk()) {
      return Status(s.code(), s.msg() + " (" + q + ")");
    }
  }
  return Status::ok();
}

Status Connection::qos(uint16_t prefetch) {
  amqp_basic_qos(conn_, kChannel, 0, prefetch, 0);
  return rpcStatus("basic.qos");
}

Status Connection::consume(const std::string& queue, bool no_ack) {
  amqp_basic_consume_ok_t* ok = amqp_basic_consume(conn_, kChannel, bytes(queue), amqp_empty_bytes,
                                                   0, no_ack ? 1 : 0, 0, amqp_empty_table);
  if (Status s = rpcStatus("basic.consume"); !s.isOk()) return s;
  consumer_tags_.push_back(str(ok->consumer_tag));
  return Status::ok();
}

Status Connection::cancelAll() {
  // rabbitmq-c keeps deliveries that arrive before cancel-ok in its frame
  // queue; next() still returns them, and the owner decides (requeue).
  for (const std::string& tag : consumer_tags_) {
    amqp_basic_cancel(conn_, kChannel, bytes(tag));
    if (Status s = rpcStatus("basic.cancel"); !s.isOk()) return s;
  }
  consumer_tags_.clear();
  return Status::ok();
}

Status Connection::enableConfirms() {
  amqp_confirm_select(conn_, kChannel);
  if (Status s = rpcStatus("confirm.select"); !s.isOk()) return s;
  confirms_ = true;
  return Status::ok();
}

Result<uint64_t> Connection::publish(const std::string& routing_key, const std::string& body,
                                     const PublishOptions& opts) {
  amqp_basic_properties_t props;
  std::memset(&props, 0, sizeof props);
  props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
  props.content_type = amqp_cstring_bytes("application/json");
  props.delivery_mode = opts.persistent ? AMQP_DELIVERY_PERSISTENT : AMQP_DELIVERY_NONPERSISTENT;
  if (!opts.correlation_id.empty()) {
    props._flags |= AMQP_BASIC_CORRELATION_ID_FLAG;
    props.correlation_id = bytes(opts.correlation_id);
  }
  if (!opts.reply_to.empty()) {
    props._flags |= AMQP_BASIC_REPLY_TO_FLAG;
    props.reply_to = bytes(opts.reply_to);
  }
  if (!opts.message_id.empty()) {
    props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
    props.message_id = bytes(opts.message_id);
  }
  std::string expiration = std::to_string(opts.expiration_ms);
  if (opts.expiration_ms > 0) {
    props._flags |= AMQP_BASIC_EXPIRATION_FLAG;
    props.expiration = bytes(expiration);
  }
  amqp_table_entry_t headers[1];
  if (!opts.signature.empty()) {
    headers[0].key = amqp_cstring_bytes(msg::kSignatureHeader);
    headers[0].value.kind = AMQP_FIELD_KIND_UTF8;
    headers[0].value.value.bytes = bytes(opts.signature);
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers = amqp_table_t{1, headers};
  }
  int rc = amqp_basic_publish(conn_, kChannel, amqp_empty_bytes, bytes(routing_key), 0, 0, &props,
                              bytes(body));
  if (Status s = libStatus(rc, "basic.publish"); !s.isOk()) return s;
  return confirms_ ? next_publish_seq_++ : uint64_t{0};
}

Status Connection::publishConfirmed(const std::string& routing_key, const std::string& body,
                                    const PublishOptions& opts, int timeout_ms) {
  Result<uint64_t> seq = publish(routing_key, body, opts);
  if (!seq.isOk()) return seq.status();
  int64_t deadline = nowMs() + timeout_ms;
  while (true) {
    int64_t left = deadline - nowMs();
    if (left <= 0) {
      broken_ = true;  // the confirm may still come; we cannot tell, so start over
      return Status(503, "amqp: publish not confirmed in time");
    }
    Result<Event> ev = readOneFrame(static_cast<int>(left));
    if (!ev.isOk()) return ev.status();
    if (const Confirm* c = std::get_if<Confirm>(&ev.value())) {
      bool covers = c->tag == seq.value() || (c->multiple && c->tag >= seq.value());
      if (covers) {
        return c->ack ? Status::ok() : Status(503, "amqp: broker refused the message (nack)");
      }
      continue;  // an older publish's confirm
    }
    if (std::holds_alternative<Delivery>(ev.value())) pending_.push_back(std::move(ev.value()));
  }
}

Result<Event> Connection::next(int timeout_ms) {
  if (!pending_.empty()) {
    Event e = std::move(pending_.front());
    pending_.pop_front();
    return e;
  }
  return readOneFrame(timeout_ms);
}

Result<Event> Connection::readOneFrame(int timeout_ms) {
  amqp_maybe_release_buffers(conn_);
  struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  amqp_envelope_t env;
  amqp_rpc_reply_t r = amqp_consume_message(conn_, &env, &tv, 0);
  if (r.reply_type == AMQP_RESPONSE_NORMAL) {
    Delivery d;
    d.tag = env.delivery_tag;
    d.queue_hint = str(env.routing_key);
    d.body = str(env.message.body);
    d.redelivered = env.redelivered != 0;
    const amqp_basic_properties_t& p = env.message.properties;
    if (p._flags & AMQP_BASIC_CORRELATION_ID_FLAG) d.correlation_id = str(p.correlation_id);
    if (p._flags & AMQP_BASIC_REPLY_TO_FLAG) d.reply_to = str(p.reply_to);
    if (p._flags & AMQP_BASIC_HEADERS_FLAG) {
      for (int i = 0; i < p.headers.num_entries; ++i) {
        const amqp_table_entry_t& e = p.headers.entries[i];
        std::string key = str(e.key);
        if (key == "x-delivery-count") {
          switch (e.value.kind) {
            case AMQP_FIELD_KIND_I64: d.delivery_count = e.value.value.i64; break;
            case AMQP_FIELD_KIND_I32: d.delivery_count = e.value.value.i32; break;
            case AMQP_FIELD_KIND_U32: d.delivery_count = e.value.value.u32; break;
            default: break;
          }
        } else if (key == "x-first-death-reason" && e.value.kind == AMQP_FIELD_KIND_UTF8) {
          d.death_reason = str(e.value.value.bytes);
        } else if (key == msg::kSignatureHeader && (e.value.kind == AMQP_FIELD_KIND_UTF8 ||
                                                    e.value.kind == AMQP_FIELD_KIND_BYTES)) {
          // The management UI's "publish message" sends header values as
          // long strings, which rabbitmq-c reports as UTF8 or BYTES.
          d.signature = str(e.value.value.bytes);
        }
      }
    }
    amqp_destroy_envelope(&env);
    return Event(std::move(d));
  }
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT) {
    return Event(Timeout{});
  }
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
      r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
    // A method other than basic.deliver: confirms, or the broker closing us.
    amqp_frame_t frame;
    int rc = amqp_simple_wait_frame(conn_, &frame);
    if (rc != AMQP_STATUS_OK) return libStatus(rc, "wait frame");
    if (frame.frame_type != AMQP_FRAME_METHOD) return Event(Timeout{});
    switch (frame.payload.method.id) {
      case AMQP_BASIC_ACK_METHOD: {
        auto* m = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
        return Event(Confirm{m->delivery_tag, m->multiple != 0, true});
      }
      case AMQP_BASIC_NACK_METHOD: {
        auto* m = static_cast<amqp_basic_nack_t*>(frame.payload.method.decoded);
        return Event(Confirm{m->delivery_tag, m->multiple != 0, false});
      }
      case AMQP_BASIC_RETURN_METHOD: {
        // We never publish mandatory, but drain a returned message if one comes.
        amqp_message_t message;
        amqp_rpc_reply_t rr = amqp_read_message(conn_, frame.channel, &message, 0);
        if (rr.reply_type != AMQP_RESPONSE_NORMAL) return libStatus(-1, "read returned message");
        amqp_destroy_message(&message);
        return Event(Timeout{});
      }
      case AMQP_BASIC_CANCEL_METHOD:
        // The queue we consumed is gone (its cluster node stopped, or it
        // was deleted): reconnecting re-declares it.
        broken_ = true;
        return Status(503, "amqp: the broker cancelled our consumer (its queue is gone)");
      case AMQP_CHANNEL_CLOSE_METHOD: {
        broken_ = true;
        auto* m = static_cast<amqp_channel_close_t*>(frame.payload.method.decoded);
        return Status(503, "amqp: broker closed the channel: " + str(m->reply_text));
      }
      case AMQP_CONNECTION_CLOSE_METHOD: {
        broken_ = true;
        auto* m = static_cast<amqp_connection_close_t*>(frame.payload.method.decoded);
        return Status(503, "amqp: broker closed the connection: " + str(m->reply_text));
      }
      default:
        return Event(Timeout{});  // basic.consume-ok arriving late and the like
    }
  }
  broken_ = true;
  return Status(503, std::string("amqp: connection lost: ") +
                         (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                              ? amqp_error_string2(r.library_error)
                              : "server exception"));
}

Status Connection::ack(uint64_t tag, bool multiple) {
  return libStatus(amqp_basic_ack(conn_, kChannel, tag, multiple ? 1 : 0), "basic.ack");
}

Status Connection::reject(uint64_t tag, bool requeue) {
  return libStatus(amqp_basic_reject(conn_, kChannel, tag, requeue ? 1 : 0), "basic.reject");
}

int Connection::fd() const { return amqp_get_sockfd(conn_); }

Connection::Cork::Cork(const Connection& c) : fd_(c.fd()) {
  int on = 1;
  if (fd_ >= 0) setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

Connection::Cork::~Cork() {
  int off = 0;
  if (fd_ >= 0) setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
}

bool Connection::hasBuffered() const {
  return !pending_.empty() || amqp_data_in_buffer(conn_) != 0 || amqp_frames_enqueued(conn_) != 0;
}

void serveUntilStopped(const std::string& url, const std::string& conn_name,
                       const std::atomic<bool>& stop,
                       const std::function<Status(Connection&)>& serve,
                       const std::function<void(const Status&)>& lost) {
  ReconnectBackoff backoff;
  std::size_t first_broker = 0;  // of a cluster's addresses, see Connection::open
  while (!stop.load()) {
    Result<std::unique_ptr<Connection>> c =
        Connection::open(url, conn_name, defaults::kAmqpHeartbeatSeconds, &first_broker);
    if (!c.isOk()) {
      log::warn("broker connect failed; retrying", {{"error", c.status().msg()}});
      backoff.sleep(stop);
      continue;
    }
    backoff.reset();
    lost(serve(*c.value()));
  }
}

}  // namespace eq::amqp

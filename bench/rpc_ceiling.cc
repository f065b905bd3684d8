// bench_rpc_ceiling: the broker's ceiling for request/reply, the number the
// sync path of EQ Reply is compared with (issue 10, docs/benchmarks.md).
//
// One process, two threads, each with its own connection to the broker:
//   client: keeps N requests in flight (default 64) on a request queue, each
//           with reply_to and correlation_id, and measures each round trip;
//   server: consumes the request queue (manual ack, prefetch 2N) and
//           publishes a reply of a fixed size to the request's reply_to.
// Options pick what each choice of the real pipeline costs: the request
// queue's type (classic or quorum), the reply path (a server-named exclusive
// queue, or RabbitMQ's direct reply-to pseudo-queue amq.rabbitmq.reply-to),
// and publisher confirms. With confirms on, the client counts the confirms of
// its requests, and the server acks a request only after its reply is
// confirmed (matched by publish sequence number, `multiple` included): the
// worker's rule "ack after the outcome is durable", pipelined.
//
// Prints one line: `CEILING queue=... reply=... confirms=... inflight=N
// rps=R p50_ms=A p99_ms=B requests=C`. Exits non-zero on a broker error.
//
// Ownership/threads: main() owns both threads; each thread owns its
// connection; they share only atomics (stop flag, server readiness).
//
// Deliberately plain rabbitmq-c, not common/amqp: the ceiling must not move
// when our own wrapper changes.
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string url = "amqp://guest:guest@127.0.0.1:5672/";
  std::string queue_type = "quorum";  // classic | quorum
  std::string reply = "direct";       // direct | exclusive
  bool confirms = true;
  int inflight = 64;
  double seconds = 5;
  double warmup = 1;
  size_t request_bytes = 256;
  size_t reply_bytes = 1024;
};

constexpr amqp_channel_t kChannel = 1;

bool failed(amqp_rpc_reply_t r, const char* what) {
  if (r.reply_type == AMQP_RESPONSE_NORMAL) return false;
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
    std::fprintf(stderr, "rpc_ceiling: %s: %s\n", what, amqp_error_string2(r.library_error));
  } else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
             r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
    std::fprintf(stderr, "rpc_ceiling: %s: channel closed: %.*s\n", what,
                 static_cast<int>(m->reply_text.len), static_cast<const char*>(m->reply_text.bytes));
  } else {
    std::fprintf(stderr, "rpc_ceiling: %s: broker error\n", what);
  }
  return true;
}

// A connection with channel 1 open, or nullptr (the error is printed).
amqp_connection_state_t connectTo(const Options& o) {
  std::vector<char> buf(o.url.begin(), o.url.end());
  buf.push_back('\0');
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(buf.data(), &info) != AMQP_STATUS_OK) {
    std::fprintf(stderr, "rpc_ceiling: bad url %s\n", o.url.c_str());
    return nullptr;
  }
  // A trailing slash names the empty vhost by the URI spec; RabbitMQ has
  // none, so read it as "/" as common/amqp does.
  char default_vhost[] = "/";
  if (info.vhost == nullptr || *info.vhost == '\0') info.vhost = default_vhost;
  amqp_connection_state_t conn = amqp_new_connection();
  amqp_socket_t* sock = amqp_tcp_socket_new(conn);
  if (sock == nullptr || amqp_socket_open(sock, info.host, info.port) != AMQP_STATUS_OK) {
    std::fprintf(stderr, "rpc_ceiling: cannot connect to %s:%d\n", info.host, info.port);
    amqp_destroy_connection(conn);
    return nullptr;
  }
  if (failed(amqp_login(conn, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user,
                        info.password),
             "login")) {
    amqp_destroy_connection(conn);
    return nullptr;
  }
  amqp_channel_open(conn, kChannel);
  if (failed(amqp_get_rpc_reply(conn), "channel.open")) {
    amqp_destroy_connection(conn);
    return nullptr;
  }
  if (o.confirms) {
    amqp_confirm_select(conn, kChannel);
    if (failed(amqp_get_rpc_reply(conn), "confirm.select")) {
      amqp_destroy_connection(conn);
      return nullptr;
    }
  }
  return conn;
}

void closeConn(amqp_connection_state_t conn) {
  amqp_channel_close(conn, kChannel, AMQP_REPLY_SUCCESS);
  amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn);
}

bool consume(amqp_connection_state_t conn, amqp_bytes_t queue, bool no_ack) {
  amqp_basic_consume(conn, kChannel, queue, amqp_empty_bytes, 0, no_ack ? 1 : 0, 0,
                     amqp_empty_table);
  return !failed(amqp_get_rpc_reply(conn), "basic.consume");
}

// Waits up to 100 ms for the next frame. 1: got one, 0: timeout, -1: error.
int nextFrame(amqp_connection_state_t conn, amqp_frame_t* frame) {
  amqp_maybe_release_buffers(conn);
  timeval tv{0, 100'000};
  int rc = amqp_simple_wait_frame_noblock(conn, frame, &tv);
  if (rc == AMQP_STATUS_TIMEOUT) return 0;
  if (rc != AMQP_STATUS_OK) {
    std::fprintf(stderr, "rpc_ceiling: wait frame: %s\n", amqp_error_string2(rc));
    return -1;
  }
  return 1;
}

struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<bool> server_ready{false};
  std::atomic<bool> server_failed{false};
  std::string queue;
};

// The server: reply to every request; with confirms, ack the request once the
// reply's confirm covers it.
void serve(const Options& o, Shared& sh) {
  amqp_connection_state_t conn = connectTo(o);
  if (conn == nullptr) {
    sh.server_failed = true;
    return;
  }
  amqp_table_entry_t arg;
  arg.key = amqp_cstring_bytes("x-queue-type");
  arg.value.kind = AMQP_FIELD_KIND_UTF8;
  arg.value.value.bytes = amqp_cstring_bytes(o.queue_type.c_str());
  amqp_table_t args{1, &arg};
  amqp_bytes_t qname = amqp_cstring_bytes(sh.queue.c_str());
  amqp_queue_declare(conn, kChannel, qname, 0, /*durable=*/1, 0, 0, args);
  if (failed(amqp_get_rpc_reply(conn), "queue.declare")) {
    sh.server_failed = true;
    amqp_destroy_connection(conn);
    return;
  }
  amqp_basic_qos(conn, kChannel, 0, static_cast<uint16_t>(std::min(2 * o.inflight, 65535)), 0);
  if (failed(amqp_get_rpc_reply(conn), "basic.qos") || !consume(conn, qname, false)) {
    sh.server_failed = true;
    amqp_destroy_connection(conn);
    return;
  }
  sh.server_ready = true;

  std::string body(o.reply_bytes, 'r');
  uint64_t next_seq = 1;
  // (publish seq, delivery tag) of replies awaiting their confirm, in order.
  std::deque<std::pair<uint64_t, uint64_t>> unconfirmed;
  bool ok = true;
  while (ok && !sh.stop) {
    amqp_frame_t frame;
    int got = nextFrame(conn, &frame);
    if (got < 0) break;
    if (got == 0 || frame.frame_type != AMQP_FRAME_METHOD) continue;
    switch (frame.payload.method.id) {
      case AMQP_BASIC_DELIVER_METHOD: {
        auto* d = static_cast<amqp_basic_deliver_t*>(frame.payload.method.decoded);
        uint64_t tag = d->delivery_tag;
        amqp_message_t msg;
        if (failed(amqp_read_message(conn, frame.channel, &msg, 0), "read request")) {
          ok = false;
          break;
        }
        amqp_basic_properties_t props;
        props._flags = AMQP_BASIC_CORRELATION_ID_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG |
                       AMQP_BASIC_DELIVERY_MODE_FLAG;
        props.correlation_id = msg.properties.correlation_id;
        props.content_type = amqp_cstring_bytes("application/json");
        props.delivery_mode = 1;
        amqp_basic_publish(conn, kChannel, amqp_empty_bytes, msg.properties.reply_to, 0, 0, &props,
                           amqp_bytes_t{body.size(), body.data()});
        amqp_destroy_message(&msg);
        if (o.confirms) {
          unconfirmed.emplace_back(next_seq++, tag);
        } else {
          amqp_basic_ack(conn, kChannel, tag, 0);
        }
        break;
      }
      case AMQP_BASIC_ACK_METHOD: {
        auto* a = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
        uint64_t last_tag = 0;
        while (!unconfirmed.empty() &&
               (unconfirmed.front().first == a->delivery_tag ||
                (a->multiple && unconfirmed.front().first < a->delivery_tag))) {
          last_tag = unconfirmed.front().second;
          unconfirmed.pop_front();
        }
        // Deliveries on one channel come in tag order and replies are
        // published in that order, so the confirmed ones are a prefix:
        // one multiple ack covers them.
        if (last_tag != 0) amqp_basic_ack(conn, kChannel, last_tag, 1);
        break;
      }
      case AMQP_BASIC_NACK_METHOD:
        std::fprintf(stderr, "rpc_ceiling: server: reply nacked\n");
        ok = false;
        break;
      case AMQP_CHANNEL_CLOSE_METHOD:
      case AMQP_CONNECTION_CLOSE_METHOD:
        std::fprintf(stderr, "rpc_ceiling: server: closed by the broker\n");
        ok = false;
        break;
      default:
        break;
    }
  }
  if (!ok) sh.server_failed = true;
  amqp_queue_delete(conn, kChannel, qname, 0, 0);
  amqp_get_rpc_reply(conn);
  closeConn(conn);
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

int runClient(const Options& o, Shared& sh) {
  amqp_connection_state_t conn = connectTo(o);
  if (conn == nullptr) return 1;
  amqp_bytes_t reply_to;
  std::string reply_name;
  if (o.reply == "direct") {
    reply_name = "amq.rabbitmq.reply-to";
    reply_to = amqp_cstring_bytes(reply_name.c_str());
  } else {
    amqp_queue_declare_ok_t* q =
        amqp_queue_declare(conn, kChannel, amqp_empty_bytes, 0, 0, /*exclusive=*/1,
                           /*auto_delete=*/1, amqp_empty_table);
    if (failed(amqp_get_rpc_reply(conn), "reply queue.declare")) return 1;
    reply_name.assign(static_cast<const char*>(q->queue.bytes), q->queue.len);
    reply_to = amqp_cstring_bytes(reply_name.c_str());
  }
  if (!consume(conn, reply_to, /*no_ack=*/true)) return 1;

  std::string body(o.request_bytes, 'q');
  std::vector<Clock::time_point> sent(static_cast<size_t>(o.inflight));
  std::vector<double> lat_ms;
  lat_ms.reserve(1 << 20);
  amqp_bytes_t qname = amqp_cstring_bytes(sh.queue.c_str());
  char cid[32];
  auto publish = [&](int slot) {
    std::snprintf(cid, sizeof cid, "%d", slot);
    amqp_basic_properties_t props;
    props._flags = AMQP_BASIC_CORRELATION_ID_FLAG | AMQP_BASIC_REPLY_TO_FLAG |
                   AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
    props.correlation_id = amqp_cstring_bytes(cid);
    props.reply_to = reply_to;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = 1;
    sent[static_cast<size_t>(slot)] = Clock::now();
    return amqp_basic_publish(conn, kChannel, amqp_empty_bytes, qname, 0, 0, &props,
                              amqp_bytes_t{body.size(), body.data()}) == AMQP_STATUS_OK;
  };
  for (int i = 0; i < o.inflight; ++i) {
    if (!publish(i)) return 1;
  }
  const auto t0 = Clock::now();
  const auto measure_from = t0 + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(o.warmup));
  const auto end = measure_from + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(o.seconds));
  uint64_t unconfirmed = 0;
  int rc = 0;
  while (Clock::now() < end) {
    if (sh.server_failed) {
      rc = 1;
      break;
    }
    amqp_frame_t frame;
    int got = nextFrame(conn, &frame);
    if (got < 0) {
      rc = 1;
      break;
    }
    if (got == 0 || frame.frame_type != AMQP_FRAME_METHOD) continue;
    if (frame.payload.method.id == AMQP_BASIC_DELIVER_METHOD) {
      amqp_message_t msg;
      if (failed(amqp_read_message(conn, frame.channel, &msg, 0), "read reply")) {
        rc = 1;
        break;
      }
      std::string c(static_cast<const char*>(msg.properties.correlation_id.bytes),
                    msg.properties.correlation_id.len);
      amqp_destroy_message(&msg);
      int slot = std::atoi(c.c_str());
      if (slot < 0 || slot >= o.inflight) continue;
      auto now = Clock::now();
      if (now >= measure_from) {
        lat_ms.push_back(std::chrono::duration<double, std::milli>(now - sent[static_cast<size_t>(slot)]).count());
      }
      if (!publish(slot)) {
        rc = 1;
        break;
      }
      if (o.confirms) ++unconfirmed;
    } else if (frame.payload.method.id == AMQP_BASIC_NACK_METHOD) {
      std::fprintf(stderr, "rpc_ceiling: client: request nacked\n");
      rc = 1;
      break;
    } else if (frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
               frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
      std::fprintf(stderr, "rpc_ceiling: client: closed by the broker\n");
      rc = 1;
      break;
    }
    // basic.ack of our requests: counted by the broker, nothing to do here.
  }
  closeConn(conn);
  if (rc != 0) return rc;
  double secs = o.seconds;
  std::vector<double> v = lat_ms;
  double p50 = percentile(v, 50), p99 = percentile(v, 99);
  std::printf(
      "CEILING queue=%s reply=%s confirms=%s inflight=%d requests=%zu rps=%.1f p50_ms=%.2f "
      "p99_ms=%.2f\n",
      o.queue_type.c_str(), o.reply.c_str(), o.confirms ? "on" : "off", o.inflight, lat_ms.size(),
      static_cast<double>(lat_ms.size()) / secs, p50, p99);
  return 0;
}

void usage() {
  std::fprintf(stderr,
               "usage: bench_rpc_ceiling [--url AMQP_URL] [--queue classic|quorum]\n"
               "         [--reply direct|exclusive] [--confirms on|off] [--inflight N]\n"
               "         [--seconds S] [--warmup S] [--request-bytes N] [--reply-bytes N]\n"
               "  --url defaults to $EQ_AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const char* u = std::getenv("EQ_AMQP_URL")) o.url = u;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      usage();
      return 2;
    }
    std::string v = argv[++i];
    if (a == "--url") o.url = v;
    else if (a == "--queue") o.queue_type = v;
    else if (a == "--reply") o.reply = v;
    else if (a == "--confirms") o.confirms = (v == "on");
    else if (a == "--inflight") o.inflight = std::atoi(v.c_str());
    else if (a == "--seconds") o.seconds = std::atof(v.c_str());
    else if (a == "--warmup") o.warmup = std::atof(v.c_str());
    else if (a == "--request-bytes") o.request_bytes = std::strtoul(v.c_str(), nullptr, 10);
    else if (a == "--reply-bytes") o.reply_bytes = std::strtoul(v.c_str(), nullptr, 10);
    else {
      usage();
      return 2;
    }
  }
  if ((o.queue_type != "classic" && o.queue_type != "quorum") ||
      (o.reply != "direct" && o.reply != "exclusive") || o.inflight < 1 || o.inflight > 100000 ||
      o.seconds <= 0) {
    usage();
    return 2;
  }
  Shared sh;
  sh.queue = "eq.bench.rpc." + std::to_string(getpid());
  std::thread server([&] { serve(o, sh); });
  for (int i = 0; i < 100 && !sh.server_ready && !sh.server_failed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int rc = 1;
  if (sh.server_ready) rc = runClient(o, sh);
  sh.stop = true;
  server.join();
  if (sh.server_failed) rc = 1;
  return rc;
}

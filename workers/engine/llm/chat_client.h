// An HTTP client for one OpenAI-compatible `POST .../chat/completions`
// endpoint, holding many requests in flight on one libcurl multi handle.
//
// Ownership and threads: a ChatClient owns one thread that drives the multi
// handle, so every job of a worker process shares its connections to the
// model server (keep-alive, no handshake per call). Any thread may call
// post(); the future it returns is fulfilled on the client's thread. The
// destructor stops that thread and fails whatever is still in flight, so
// callers must not outlive the client (the engine that owns it is destroyed
// after the worker has drained its jobs).
//
// It knows nothing about prompts or schemas: bodies go out as given and come
// back as text, with the HTTP status and a parsed Retry-After.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "common/status.h"

namespace eq::engine::llm {

struct ChatResponse {
  long http_status = 0;
  std::string body;
  int64_t retry_after_ms = -1;  // -1: no (usable) Retry-After header
};

class ChatClient {
 public:
  // url: the full endpoint, e.g. http://127.0.0.1:8080/v1/chat/completions.
  // api_key: sent as "Authorization: Bearer" when not empty.
  ChatClient(std::string url, std::string api_key);
  ~ChatClient();
  ChatClient(const ChatClient&) = delete;
  ChatClient& operator=(const ChatClient&) = delete;

  // Sends `body` (JSON). The result is an HTTP answer of any status, or an
  // error: 504 when no full answer came within timeout_ms, 502 when the
  // answer was too large, 503 when the server could not be reached or the
  // transfer failed (the only error worth retrying).
  std::future<Result<ChatResponse>> post(std::string body, int64_t timeout_ms);

  const std::string& url() const { return url_; }

 private:
  struct Call;
  void run();
  void start(std::unique_ptr<Call> call);
  void finish(CURL* easy, CURLcode code);

  const std::string url_;
  const std::string api_key_;
  CURLM* multi_ = nullptr;
  std::mutex mu_;                            // guards queued_ and stopping_
  std::deque<std::unique_ptr<Call>> queued_;  // posted, not yet on the multi handle
  bool stopping_ = false;
  std::unordered_set<Call*> active_;  // on the multi handle; touched by thread_ only
  std::thread thread_;
};

}  // namespace eq::engine::llm

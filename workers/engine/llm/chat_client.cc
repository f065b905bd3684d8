#include "workers/engine/llm/chat_client.h"

#include <algorithm>

#include "common/defaults.h"
#include "common/log.h"

namespace eq::engine::llm {

// One request on the multi handle. Owned by the client from post() until
// finish(); the easy handle points at its buffers, so it never moves.
struct ChatClient::Call {
  std::string body;
  int64_t timeout_ms = 0;
  std::promise<Result<ChatResponse>> promise;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string response;
  bool too_large = false;

  ~Call() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
  }
};

namespace {

size_t onBody(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<std::string*>(user);
  size_t bytes = size * n;
  if (call->size() + bytes > defaults::kLlmMaxResponseBytes) return 0;  // aborts the transfer
  call->append(data, bytes);
  return bytes;
}

}  // namespace

ChatClient::ChatClient(std::string url, std::string api_key)
    : url_(std::move(url)), api_key_(std::move(api_key)) {
  multi_ = curl_multi_init();
  if (multi_ == nullptr) {
    log::error("curl_multi_init failed");
    std::abort();  // out of memory at start-up: nothing sensible to do
  }
  thread_ = std::thread([this] { run(); });
}

ChatClient::~ChatClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  curl_multi_wakeup(multi_);
  thread_.join();
  curl_multi_cleanup(multi_);
}

std::future<Result<ChatResponse>> ChatClient::post(std::string body, int64_t timeout_ms) {
  auto call = std::make_unique<Call>();
  call->body = std::move(body);
  call->timeout_ms = std::max<int64_t>(timeout_ms, 1);
  std::future<Result<ChatResponse>> f = call->promise.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      call->promise.set_value(Status(503, "llm: client is shutting down"));
      return f;
    }
    queued_.push_back(std::move(call));
  }
  curl_multi_wakeup(multi_);
  return f;
}

void ChatClient::start(std::unique_ptr<Call> call) {
  CURL* easy = curl_easy_init();
  if (easy == nullptr) {
    call->promise.set_value(Status(503, "llm: curl_easy_init failed"));
    return;
  }
  call->easy = easy;
  call->headers = curl_slist_append(call->headers, "Content-Type: application/json");
  call->headers = curl_slist_append(call->headers, "Accept: application/json");
  if (!api_key_.empty()) {
    call->headers = curl_slist_append(call->headers, ("Authorization: Bearer " + api_key_).c_str());
  }
  curl_easy_setopt(easy, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, call->headers);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, call->body.c_str());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(call->body.size()));
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(call->timeout_ms));
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<int64_t>(call->timeout_ms, 10'000)));
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, onBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &call->response);
  curl_easy_setopt(easy, CURLOPT_PRIVATE, call.get());
  // Model servers answer with one JSON document; a redirect would be a
  // misconfigured base URL, better reported than followed.
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  if (CURLMcode rc = curl_multi_add_handle(multi_, easy); rc != CURLM_OK) {
    call->promise.set_value(Status(503, std::string("llm: ") + curl_multi_strerror(rc)));
    return;
  }
  active_.insert(call.release());  // owned through active_ until finish()
}

void ChatClient::finish(CURL* easy, CURLcode code) {
  Call* raw = nullptr;
  curl_easy_getinfo(easy, CURLINFO_PRIVATE, &raw);
  active_.erase(raw);
  std::unique_ptr<Call> call(raw);
  curl_multi_remove_handle(multi_, easy);
  if (code == CURLE_OK) {
    ChatResponse r;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r.http_status);
    curl_off_t retry_after = -1;
    // libcurl parses both forms of the header (seconds and HTTP date) and
    // reports 0 when there is none, so only a positive value counts
    // ("Retry-After: 0" then gets the engine's own backoff, which is fine).
    if (curl_easy_getinfo(easy, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK &&
        retry_after > 0) {
      r.retry_after_ms = static_cast<int64_t>(retry_after) * 1000;
    }
    r.body = std::move(call->response);
    call->promise.set_value(std::move(r));
    return;
  }
  if (code == CURLE_OPERATION_TIMEDOUT) {
    call->promise.set_value(
        Status(504, "llm: no answer within " + std::to_string(call->timeout_ms) + " ms"));
  } else if (code == CURLE_WRITE_ERROR) {
    // 502: the same request would get the same answer, so it is not retried.
    call->promise.set_value(Status(502, "llm: answer larger than " +
                                            std::to_string(defaults::kLlmMaxResponseBytes) +
                                            " bytes"));
  } else {
    call->promise.set_value(Status(503, std::string("llm: ") + curl_easy_strerror(code)));
  }
}

void ChatClient::run() {
  while (true) {
    std::deque<std::unique_ptr<Call>> incoming;
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mu_);
      incoming.swap(queued_);
      stopping = stopping_;
    }
    if (stopping) {
      for (auto& call : incoming) call->promise.set_value(Status(503, "llm: client stopped"));
      break;
    }
    for (auto& call : incoming) start(std::move(call));

    int running = 0;
    curl_multi_perform(multi_, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
      if (m->msg == CURLMSG_DONE) finish(m->easy_handle, m->data.result);
    }
    // Sleeps until a socket is ready, a timeout of curl's is due, or post()
    // or the destructor wakes it.
    curl_multi_poll(multi_, nullptr, 0, 1000, nullptr);
  }
  // Fail whatever is still on the multi handle.
  for (Call* raw : active_) {
    std::unique_ptr<Call> call(raw);
    curl_multi_remove_handle(multi_, call->easy);
    call->promise.set_value(Status(503, "llm: client stopped"));
  }
  active_.clear();
}

}  // namespace eq::engine::llm

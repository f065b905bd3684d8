// McpServer: the JSON-RPC 2.0 side of eq-mcp. Takes one line of input (one
// message or, where the negotiated revision allows, a batch), runs it, and
// returns the line to write back, if any. Holds the session's state: whether
// `initialize` happened and which protocol revision was agreed.
//
// Lives on the stdin thread (see stdio.h), created and destroyed by main()
// or a test; the ToolCatalog's transport must outlive it.
#pragma once

#include <rapidjson/document.h>

#include <optional>
#include <string>
#include <string_view>

#include "tools/mcp/protocol_version.h"
#include "tools/mcp/tools.h"

namespace eq::mcp {

// JSON-RPC 2.0 error codes (and the one implementation-defined code we use,
// from the range the specification reserves for servers).
namespace rpc {
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kNotInitialized = -32002;
}  // namespace rpc

class McpServer {
 public:
  McpServer(ApiTransport& api, std::string api_url) : tools_(api, std::move(api_url)) {}

  // Runs one line (without its newline). Returns the line to send back
  // (without newline), or an empty string when nothing is to be sent: a
  // notification, a response from the client, a batch of notifications.
  std::string handleLine(std::string_view line);

  // The reply to a line longer than we accept; its content was not read, so
  // the id is unknown.
  static std::string oversizedLineError(size_t max_bytes);

  bool initialized() const { return version_.has_value(); }
  std::optional<ProtocolVersion> version() const { return version_; }
  bool clientReady() const { return client_ready_; }

 private:
  // Handles one message of a line or batch; returns its response or nothing.
  std::optional<std::string> handleMessage(const rapidjson::Value& m, bool in_batch);
  std::string initialize(const rapidjson::Value& id, const rapidjson::Value* params, bool in_batch);
  std::string callTool(const rapidjson::Value& id, const rapidjson::Value* params);
  void onNotification(std::string_view method);

  ToolCatalog tools_;
  std::optional<ProtocolVersion> version_;  // set by initialize
  bool client_ready_ = false;               // notifications/initialized received
};

}  // namespace eq::mcp

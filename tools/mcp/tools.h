// The five tools of eq-mcp and how each maps onto the EQ Reply HTTP API:
// their definitions for tools/list (input and output JSON Schemas mirroring
// schema/openapi.yaml) and the execution of tools/call through an
// ApiTransport.
//
// A ToolCatalog lives on the stdin thread, inside McpServer, and holds a
// reference to the transport that main() (or a test) owns.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>
#include <string_view>

#include "tools/mcp/api_client.h"
#include "tools/mcp/protocol_version.h"

namespace eq::mcp {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// The outcome of tools/call. Either a JSON-RPC error (the request itself is
// wrong: unknown tool, params of the wrong shape) or a tool result, which
// may be an error the model can read and act on (isError: the API refused,
// the API is unreachable, an argument is wrong).
struct ToolResult {
  int rpc_error = 0;  // non-zero: answer with this JSON-RPC error code instead
  std::string rpc_message;
  bool is_error = false;
  std::string text;             // the text content block
  std::string structured_json;  // the API's `data` object (JSON text); empty on errors
};

class ToolCatalog {
 public:
  // `api_url` only names the API in error messages.
  ToolCatalog(ApiTransport& api, std::string api_url) : api_(api), api_url_(std::move(api_url)) {}

  // Writes the value of tools/list's "tools" member: an array of tool
  // definitions with the fields `version` knows.
  void writeList(JsonWriter& w, ProtocolVersion version) const;

  // Runs tool `name` with `arguments` (null when the call had none).
  ToolResult call(std::string_view name, const rapidjson::Value* arguments);

 private:
  ToolResult forward(const std::string& method, const std::string& path, const std::string& body,
                     const std::vector<std::string>& headers);

  ApiTransport& api_;
  std::string api_url_;
};

}  // namespace eq::mcp

// The MCP protocol revisions eq-mcp speaks and what each one allows. Plain
// values and pure functions; the negotiated version is held by McpServer.
//
// What differs between them, for a tools-only server:
//   2024-11-05  tools with inputSchema; results are content blocks only.
//   2025-03-26  adds tool annotations (readOnlyHint, ...) and JSON-RPC
//               batches (arrays of messages).
//   2025-06-18  removes batches again; adds tool titles, outputSchema and
//               structuredContent.
#pragma once

#include <optional>
#include <string_view>

namespace eq::mcp {

enum class ProtocolVersion { k20241105, k20250326, k20250618 };

constexpr ProtocolVersion kLatestProtocolVersion = ProtocolVersion::k20250618;

std::string_view toString(ProtocolVersion v);
// nullopt for a revision we do not implement.
std::optional<ProtocolVersion> parseProtocolVersion(std::string_view s);
// The revision to answer a client that asked for `requested`: the same one
// when we implement it, else our latest (the client then decides whether it
// can speak that, as the lifecycle section of the specification says).
ProtocolVersion negotiate(std::string_view requested);

inline bool allowsBatches(ProtocolVersion v) { return v == ProtocolVersion::k20250326; }
inline bool hasToolAnnotations(ProtocolVersion v) { return v >= ProtocolVersion::k20250326; }
inline bool hasStructuredOutput(ProtocolVersion v) { return v >= ProtocolVersion::k20250618; }

}  // namespace eq::mcp

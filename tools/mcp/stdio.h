// The stdio transport of MCP: newline-delimited JSON-RPC on a pair of file
// descriptors (stdin and stdout in eq-mcp). Reads lines, hands each to the
// McpServer and writes its answer as one line; stdout carries nothing else
// (logs go to stderr).
//
// runStdio() runs on the calling thread until end of input, a stop signal or
// a write error; it owns nothing and closes nothing.
#pragma once

#include <cstddef>

#include "tools/mcp/server.h"

namespace eq::mcp {

enum class StopReason { kEndOfInput, kSignal, kOutputClosed, kInputError };

// Serves `server` on in_fd/out_fd. `signal_fd` (a signalfd, or -1 for none)
// is watched next to in_fd: once readable, the loop stops before reading the
// next message. Lines longer than max_line_bytes are answered with an error
// and skipped up to their newline. A final line without a newline is still
// handled at end of input.
StopReason runStdio(McpServer& server, int in_fd, int out_fd, int signal_fd, size_t max_line_bytes);

}  // namespace eq::mcp

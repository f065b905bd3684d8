// eq-mcp: a Model Context Protocol server on stdio that wraps the EQ Reply
// HTTP API (EQ_API_URL, EQ_API_KEY). Reads the configuration, then serves
// newline-delimited JSON-RPC on stdin/stdout until end of input (exit 0) or
// SIGTERM/SIGINT (exit 0). A bad configuration exits 2 with the reason on
// stderr. See tools/mcp/server.h for the protocol, tools.h for the tools.
#include <curl/curl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "common/defaults.h"
#include "common/file_modes.h"
#include "common/log.h"
#include "common/usage.h"
#include "tools/mcp/api_client.h"
#include "tools/mcp/config.h"
#include "tools/mcp/server.h"
#include "tools/mcp/stdio.h"

namespace {

constexpr char kUsage[] =
    "usage: eq-mcp [-h | --help]\n"
    "\n"
    "A Model Context Protocol server for EQ Reply: an MCP client (a desktop\n"
    "assistant, an agent) starts it and speaks newline-delimited JSON-RPC on its\n"
    "stdin and stdout; its tools (generate_reply, generate_reply_async,\n"
    "get_task, analyze_message, get_quota) call the EQ Reply HTTP API. Logs go\n"
    "to stderr. Exits 0 at the end of stdin or on SIGTERM/SIGINT.\n"
    "\n"
    "It takes no other arguments. Its configuration is the environment:\n"
    "EQ_API_KEY (required), EQ_API_URL (default http://127.0.0.1:8080),\n"
    "EQ_MCP_TIMEOUT_MS, EQ_LOG_LEVEL; README.md (\"MCP server\" and\n"
    "\"Configuration\") has the client configuration and every default.\n"
    "A missing EQ_API_KEY or a bad variable exits 2.\n"
    "\n"
    "  -h, --help   print this and exit\n";

}  // namespace

int main(int argc, char** argv) {
  if (eq::cli::wantsHelp(argc, argv)) return eq::cli::usage(kUsage);
  if (argc > 1) return eq::cli::usage(kUsage, std::string("unknown argument: ") + argv[1]);
  eq::restrictNewFiles();  // before any file is created: common/file_modes.h
  eq::log::setComponent("mcp");
  eq::Result<eq::mcp::McpConfig> cfg =
      eq::mcp::McpConfig::fromEnv([](const char* name) { return std::getenv(name); });
  if (!cfg.isOk()) {
    std::fprintf(stderr, "eq-mcp: %s\n", cfg.status().msg().c_str());
    return 2;
  }
  const eq::mcp::McpConfig& config = cfg.value();
  eq::log::setLevel(config.log_level);

  // Signals arrive on a signalfd instead of a handler: the stdin loop polls
  // it beside stdin and the HTTP client checks it while a call runs, so no
  // global flag is needed. Blocked before libcurl starts resolver threads,
  // which inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  int signal_fd = signalfd(-1, &stop_signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    std::perror("eq-mcp: signalfd");
    return 1;
  }
  // A client that closes our stdout must not kill us mid-write: the write
  // fails with EPIPE and the loop ends.
  std::signal(SIGPIPE, SIG_IGN);

  curl_global_init(CURL_GLOBAL_DEFAULT);
  int exit_code = 0;
  {
    auto stop_requested = [signal_fd] {
      pollfd p{signal_fd, POLLIN, 0};
      return ::poll(&p, 1, 0) > 0;
    };
    eq::mcp::CurlTransport api(config.api_url, config.api_key, config.timeout_ms, stop_requested);
    eq::mcp::McpServer server(api, config.api_url);
    eq::log::info("serving MCP on stdio", {{"api_url", config.api_url}});
    eq::mcp::StopReason why = eq::mcp::runStdio(server, STDIN_FILENO, STDOUT_FILENO, signal_fd,
                                                eq::defaults::kMcpMaxLineBytes);
    switch (why) {
      case eq::mcp::StopReason::kEndOfInput:
        eq::log::info("end of input: exiting");
        break;
      case eq::mcp::StopReason::kSignal:
        eq::log::info("signal: exiting");
        break;
      case eq::mcp::StopReason::kOutputClosed:
        eq::log::info("stdout closed: exiting");
        break;
      case eq::mcp::StopReason::kInputError:
        exit_code = 1;
        break;
    }
  }
  curl_global_cleanup();
  ::close(signal_fd);
  return exit_code;
}

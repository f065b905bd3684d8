#include "workers/engine/factory.h"

#include "common/embedded.h"
#include "workers/engine/builtin/builtin_engine.h"

namespace eq::engine {

Result<std::unique_ptr<Engine>> makeEngine(const std::string& name) {
  if (name == "builtin") {
    auto e = builtin::BuiltinEngine::create(
        embedded::file("workers/engine/builtin/data/lexicon.tsv"),
        embedded::file("workers/engine/builtin/data/phrases.tsv"));
    if (!e.isOk()) return e.status();
    return std::unique_ptr<Engine>(std::move(e).value());
  }
  // TODO(issue 5): the OpenAI-compatible backend. Until it exists, asking for
  // it is a start-up error rather than a silent fallback.
  return Status(500, "EQ_ENGINE=" + name + " is not available in this build (use builtin)");
}

}  // namespace eq::engine

#include "workers/engine/factory.h"

#include "common/embedded.h"
#include "workers/engine/builtin/builtin_engine.h"
#include "workers/engine/llm/llm_engine.h"

namespace eq::engine {

Result<std::unique_ptr<Engine>> makeBuiltinEngine() {
  auto e =
      builtin::BuiltinEngine::create(embedded::file("workers/engine/builtin/data/lexicon.tsv"),
                                     embedded::file("workers/engine/builtin/data/phrases.tsv"),
                                     embedded::file("workers/engine/builtin/data/examples.tsv"),
                                     embedded::file("workers/engine/builtin/data/situations.tsv"),
                                     embedded::file("workers/engine/builtin/data/situation_examples.tsv"));
  if (!e.isOk()) return e.status();
  return std::unique_ptr<Engine>(std::move(e).value());
}

Result<std::unique_ptr<Engine>> makeEngine(const Config& cfg) {
  if (cfg.engine == "builtin") return makeBuiltinEngine();
  if (cfg.engine == "llm") {
    // Config::fromEnv already refused llm without a base URL and a model.
    std::unique_ptr<Engine> fallback;
    if (cfg.llm.fallback_builtin) {
      auto b = makeBuiltinEngine();
      if (!b.isOk()) return b.status();
      fallback = std::move(b).value();
    }
    return std::unique_ptr<Engine>(
        std::make_unique<llm::LlmEngine>(cfg.llm, std::move(fallback)));
  }
  return Status(500, "EQ_ENGINE=" + cfg.engine + " is not an engine (use builtin or llm)");
}

}  // namespace eq::engine

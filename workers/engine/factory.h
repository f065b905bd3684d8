// Builds the engine a worker is configured with (EQ_ENGINE and, for llm,
// EQ_LLM_*). The returned engine is owned by the caller and immutable after
// construction.
#pragma once

#include <memory>

#include "common/config.h"
#include "common/status.h"
#include "workers/engine/engine.h"

namespace eq::engine {

Result<std::unique_ptr<Engine>> makeEngine(const Config& cfg);

// The built-in engine from the data compiled into the binary.
Result<std::unique_ptr<Engine>> makeBuiltinEngine();

}  // namespace eq::engine

// Builds the engine a worker is configured with (EQ_ENGINE). The returned
// engine is owned by the caller and immutable after construction.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "workers/engine/engine.h"

namespace eq::engine {

Result<std::unique_ptr<Engine>> makeEngine(const std::string& name);

}  // namespace eq::engine

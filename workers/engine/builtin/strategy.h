// Strategy fit: how well each strategy suits the signals of a message, in
// [0, 1], kept as components (emotion, intensity, stage, scene, situation,
// act) so that perfect mode can say which one made the difference.
//
// The fit tables are constants (strategy.cc); fitStrategies and
// rankStrategies are pure functions, safe on any thread.
#pragma once

#include <array>
#include <cstdint>

#include "workers/engine/builtin/reading.h"
#include "workers/engine/builtin/vocabulary.h"

namespace eq::engine::builtin::detail {

// A strategy is "applicable" (offered in standard and perfect mode) from here.
constexpr double kApplicableFit = 0.3;

enum Component : uint8_t {
  kByEmotion,
  kByIntensity,
  kByStage,
  kByScene,
  kBySituation,
  kByAct,
  kComponentCount
};

struct Fit {
  std::array<double, kComponentCount> parts{};
  double total = 0;
};

// The fit of every strategy, indexed by Strategy.
std::array<Fit, kStrategyCount> fitStrategies(const Signals& sig);

// The strategies by fit, best first; equal fits keep the Strategy order.
std::array<Strategy, kStrategyCount> rankStrategies(const std::array<Fit, kStrategyCount>& fits);

}  // namespace eq::engine::builtin::detail

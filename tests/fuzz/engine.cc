// Fuzz target: the built-in engine. Any message eq-api would accept (valid
// UTF-8, trimmed, 1..2000 code points) gets an analysis and exactly
// reply_count replies in every mode, each a non-empty valid UTF-8 text with
// a score in [0, 1]; nothing crashes or reads out of bounds.
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

#include "api/validation.h"
#include "common/defaults.h"
#include "common/utf8.h"
#include "tests/fuzz/fuzz_check.h"
#include "workers/engine/factory.h"

namespace {

constexpr std::string_view kScenes[] = {"",       "chat",   "ambiguous", "dating", "humor",
                                        "conflict", "social", "work",      "breakup", "proposal"};

const eq::engine::Engine& engine() {
  static std::unique_ptr<eq::engine::Engine> e = eq::engine::makeBuiltinEngine().value();
  return *e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // The first two bytes choose mode, scene and count; the rest is the text,
  // split at the first NUL into message and context.
  uint8_t pick = data[0], scene = data[1];
  std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  std::string_view message = rest.substr(0, rest.find('\0'));
  std::string_view context =
      message.size() < rest.size() ? rest.substr(message.size() + 1) : std::string_view();
  if (!eq::utf8::isValid(rest) || context.find('\0') != std::string_view::npos) return 0;
  std::string msg = eq::api::trimUnicodeSpace(message);
  std::string ctx = eq::api::trimUnicodeSpace(context);
  size_t cps = eq::api::codePoints(msg);
  if (cps == 0 || cps > eq::defaults::kMaxMessageCodePoints) return 0;

  eq::engine::ReplyInput in;
  in.mode = static_cast<eq::engine::Mode>(pick % 3);
  in.reply_count = 1 + (pick / 3) % 5;
  in.message = msg;
  in.context = ctx;
  in.scene = std::string(kScenes[scene % std::size(kScenes)]);
  eq::Result<eq::engine::ReplyOutput> out = engine().reply(in);
  FUZZ_CHECK(out.isOk());
  FUZZ_CHECK(out.value().replies.size() == static_cast<size_t>(in.reply_count));
  for (const eq::engine::Reply& r : out.value().replies) {
    FUZZ_CHECK(!r.text.empty());
    FUZZ_CHECK(eq::utf8::isValid(r.text));
    FUZZ_CHECK(eq::utf8::isValid(r.eq_analysis));
    FUZZ_CHECK(r.score >= 0.0 && r.score <= 1.0);
  }
  eq::Result<eq::engine::Analysis> a = engine().analyze({msg, ctx, in.scene, 0});
  FUZZ_CHECK(a.isOk());
  FUZZ_CHECK(!a.value().emotion.empty());
  FUZZ_CHECK(a.value().intensity >= 0.0 && a.value().intensity <= 1.0);
  FUZZ_CHECK(eq::utf8::isValid(a.value().underlying_need));
  return 0;
}

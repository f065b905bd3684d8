#include "workers/engine/llm/prompts.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <utility>

namespace eq::engine::llm {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

// The strategies both engines know (the built-in engine's names), each with
// the instruction a model gets for it.
struct StrategyInfo {
  std::string_view name;
  std::string_view label_zh;
  std::string_view instruction;
};
constexpr std::array<StrategyInfo, 9> kStrategies = {{
    {"empathize", "共情", "name the feeling behind the message and show you understand it"},
    {"reassure", "安抚", "calm the worry, offer security and a concrete next step"},
    {"humor", "幽默", "lighten the mood with warm, self-aware humor that never mocks the sender"},
    {"apologize", "道歉", "own your part sincerely and specifically, without excuses"},
    {"boundary", "表明边界", "state your limit kindly and clearly, without attacking"},
    {"flirt", "轻撩", "be lightly playful and affectionate, never pushy"},
    {"congratulate", "祝贺", "share the joy and celebrate the sender's news or success"},
    {"space", "给空间", "acknowledge the feeling and give the sender room, without pressure"},
    {"curious", "好奇追问", "ask an open, caring question that invites the sender to say more"},
}};

constexpr std::string_view kEmotions =
    "joy, affection, anger, sadness, anxiety, disgust, surprise, neutral";
constexpr std::string_view kStages =
    "stranger, acquaintance, ambiguous, dating, committed, strained, post_breakup, colleague, "
    "family, unknown";

std::string_view sceneHint(const std::string& scene) {
  if (scene == "chat") return "everyday chat";
  if (scene == "ambiguous") return "two people flirting who are not (yet) a couple";
  if (scene == "dating") return "a dating relationship";
  if (scene == "humor") return "the user wants a witty, funny answer";
  if (scene == "conflict") return "an argument or conflict between the two";
  if (scene == "social") return "a social or group occasion";
  if (scene == "work") return "work: colleagues, a manager or clients";
  if (scene == "breakup") return "a breakup or its aftermath";
  if (scene == "proposal") return "a confession of feelings or a proposal";
  return "";
}

constexpr std::string_view kRole =
    "You are EQ Reply, a coach with very high emotional intelligence. A user received a "
    "message from someone and wants help with it. Write in the language of the received "
    "message (Simplified Chinese when it is Chinese), naturally, as a person would text. ";

std::string jsonOnly(const ChatCall& call) {
  std::string s = "Answer with one JSON object only, no markdown and no other text";
  if (!call.settings.json_schema) s += ", matching this JSON Schema: " + call.schema_json;
  return s + ".";
}

// The user turn shared by every call: the message, and what the user told
// about it.
std::string describeInput(const std::string& message, const std::string& context,
                          const std::string& scene) {
  std::string out = "Received message:\n<<<\n" + message + "\n>>>\n";
  if (!context.empty()) out += "Context from the user:\n<<<\n" + context + "\n>>>\n";
  std::string_view hint = sceneHint(scene);
  if (!hint.empty()) out += "Scene: " + scene + " (" + std::string(hint) + ").\n";
  return out;
}

std::string describeAnalysis(const Analysis& a) {
  return "Analysis of the message: emotion " + a.emotion + ", intensity " +
         std::to_string(a.intensity).substr(0, 4) + ", relationship stage " +
         a.relationship_stage + ", underlying need: " + a.underlying_need +
         ", suggested strategy: " + a.suggested_strategy + ".\n";
}

std::string strategyList() {
  std::string out;
  for (const StrategyInfo& s : kStrategies) {
    out += "- " + std::string(s.name) + ": " + std::string(s.instruction) + "\n";
  }
  return out;
}

std::string repliesSchema(int count) {
  std::string n = std::to_string(count);
  return R"({"type":"object","additionalProperties":false,"required":["replies"],)"
         R"("properties":{"replies":{"type":"array","minItems":)" + n + R"(,"maxItems":)" + n +
         R"(,"items":{"type":"object","additionalProperties":false,)"
         R"("required":["text","score","eq_analysis"],"properties":{)"
         R"("text":{"type":"string"},"score":{"type":"number","minimum":0,"maximum":1},)"
         R"("eq_analysis":{"type":"string"}}}}}})";
}

std::string analysisSchema() {
  return R"({"type":"object","additionalProperties":false,)"
         R"("required":["emotion","intensity","underlying_need","relationship_stage","suggested_strategy"],)"
         R"("properties":{"emotion":{"type":"string","enum":["joy","affection","anger","sadness",)"
         R"("anxiety","disgust","surprise","neutral"]},)"
         R"("intensity":{"type":"number","minimum":0,"maximum":1},)"
         R"("underlying_need":{"type":"string"},)"
         R"("relationship_stage":{"type":"string","enum":["stranger","acquaintance","ambiguous",)"
         R"("dating","committed","strained","post_breakup","colleague","family","unknown"]},)"
         R"("suggested_strategy":{"type":"string"}}})";
}

std::string judgeSchema(int candidates) {
  std::string n = std::to_string(candidates);
  return R"({"type":"object","additionalProperties":false,"required":["ranking","comparison"],)"
         R"("properties":{"ranking":{"type":"array","minItems":)" + n + R"(,"maxItems":)" + n +
         R"(,"items":{"type":"object","additionalProperties":false,)"
         R"("required":["candidate","score","reason"],"properties":{)"
         R"("candidate":{"type":"integer","minimum":1,"maximum":)" + n + R"(},)"
         R"("score":{"type":"number","minimum":0,"maximum":1},"reason":{"type":"string"}}}},)"
         R"("comparison":{"type":"string"}}})";
}

ChatCall makeCall(const CallSettings& s, std::string schema_name, std::string schema_json,
                  std::string system, std::string user) {
  ChatCall call;
  call.settings = s;
  call.schema_name = std::move(schema_name);
  call.schema_json = std::move(schema_json);
  call.messages.push_back({"system", std::move(system) + jsonOnly(call)});
  call.messages.push_back({"user", std::move(user)});
  return call;
}

}  // namespace

std::string strategyLabel(std::string_view strategy, bool chinese) {
  for (const StrategyInfo& s : kStrategies) {
    if (s.name == strategy) return std::string(chinese ? s.label_zh : s.name);
  }
  return std::string(strategy);
}

bool looksChinese(std::string_view text) {
  // UTF-8 lead bytes of U+3400..U+9FFF (CJK ideographs) are E3 (from U+3400)
  // through E9; a three-byte sequence starting there is close enough.
  for (size_t i = 0; i + 2 < text.size(); ++i) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b >= 0xE4 && b <= 0xE9) return true;
    if (b == 0xE3 && static_cast<unsigned char>(text[i + 1]) >= 0x90) return true;
  }
  return false;
}

std::string encodeChatCall(const ChatCall& call) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  auto str = [&](const std::string& v) {
    w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  w.Key("model");
  str(call.settings.model);
  w.Key("messages");
  w.StartArray();
  for (const Message& m : call.messages) {
    w.StartObject();
    w.Key("role");
    str(m.role);
    w.Key("content");
    str(m.content);
    w.EndObject();
  }
  w.EndArray();
  w.Key("temperature");
  w.Double(call.settings.temperature);
  w.Key("max_tokens");
  w.Int64(call.settings.max_tokens);
  w.Key("stream");
  w.Bool(false);
  w.Key("response_format");
  w.StartObject();
  if (call.settings.json_schema) {
    w.Key("type");
    w.String("json_schema");
    w.Key("json_schema");
    w.StartObject();
    w.Key("name");
    str(call.schema_name);
    w.Key("strict");
    w.Bool(true);
    w.Key("schema");
    // The schema is our own constant text: embedded as raw JSON.
    w.RawValue(call.schema_json.c_str(), call.schema_json.size(), rapidjson::kObjectType);
    w.EndObject();
  } else {
    w.Key("type");
    w.String("json_object");
  }
  w.EndObject();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

ChatCall withRepair(ChatCall call, const std::string& bad_answer, const std::string& error) {
  call.messages.push_back({"assistant", bad_answer});
  call.messages.push_back(
      {"user", "That answer was rejected: " + error +
                   ". Answer again with one JSON object that follows the schema exactly, "
                   "no markdown and no other text."});
  return call;
}

ChatCall analysisCall(const CallSettings& s, const AnalyzeInput& in) {
  std::string system = std::string(kRole) +
                       "Analyze the received message. emotion: the sender's main emotion, one of " +
                       std::string(kEmotions) +
                       ". intensity: 0 (barely there) to 1 (overwhelming); read degree words, "
                       "negation (\"not unhappy\"), contrast (the clause after \"but\" weighs "
                       "more), irony, rhetorical questions, punctuation and emoji. "
                       "relationship_stage: between sender and user, from the context, one of " +
                       std::string(kStages) +
                       " (unknown when nothing tells). underlying_need: what the sender really "
                       "wants, one short sentence. suggested_strategy: how the user should "
                       "respond, one short sentence. Both sentences in the message's language. ";
  return makeCall(s, "analysis", analysisSchema(), std::move(system),
                  describeInput(in.message, in.context, in.scene));
}

ChatCall repliesCall(const CallSettings& s, const ReplyInput& in, const Analysis* analysis,
                     std::string_view strategy, int count) {
  std::string n = std::to_string(count);
  std::string system = std::string(kRole) + "Write exactly " + n +
                       " distinct replies the user could send back. Each reply must respond to "
                       "what this message actually says (its own words and details), sound "
                       "natural, and fit the relationship and scene. ";
  if (!strategy.empty()) {
    auto it = std::find_if(kStrategies.begin(), kStrategies.end(),
                           [&](const StrategyInfo& i) { return i.name == strategy; });
    std::string instruction = it != kStrategies.end() ? std::string(it->instruction) : "";
    system += "Use this strategy: " + std::string(strategy) + " (" + instruction + "). ";
  } else if (count > 1) {
    system += "Use a different strategy for each reply, chosen from:\n" + strategyList();
  } else {
    system += "Choose the strategy that fits best from:\n" + strategyList();
  }
  system += "score: how well the reply will land, 0 to 1, judged on empathy, fit to the "
            "message and relationship, and how natural it sounds; best first. eq_analysis: "
            "one or two sentences in the message's language on why the reply works. ";
  std::string user = describeInput(in.message, in.context, in.scene);
  if (analysis != nullptr) user += describeAnalysis(*analysis);
  return makeCall(s, "replies", repliesSchema(count), std::move(system), std::move(user));
}

ChatCall judgeCall(const CallSettings& s, const ReplyInput& in, const Analysis& analysis,
                   const std::vector<Candidate>& candidates) {
  std::string n = std::to_string(candidates.size());
  std::string system =
      std::string(kRole) + "You judge " + n +
      " candidate replies to the received message. Rank every candidate, best first: candidate "
      "is its number, score 0 to 1 for how well it will land (empathy, fit to this message and "
      "relationship, naturalness, risk of backfiring), reason one sentence. comparison: two or "
      "three sentences comparing the strategies for this message. Reasons and comparison in the "
      "message's language. ";
  std::string user = describeInput(in.message, in.context, in.scene) + describeAnalysis(analysis) +
                     "Candidates:\n";
  for (size_t i = 0; i < candidates.size(); ++i) {
    user += std::to_string(i + 1) + ". [" + candidates[i].strategy + "] " +
            candidates[i].reply.text + "\n";
  }
  return makeCall(s, "judge", judgeSchema(static_cast<int>(candidates.size())), std::move(system),
                  std::move(user));
}

std::vector<std::string> perfectStrategies(const Analysis& analysis, const std::string& scene,
                                           int reply_count) {
  // Most fitting first: what the scene calls for, then the emotion, then the
  // always-safe ones.
  std::vector<std::string_view> order;
  auto add = [&](std::initializer_list<std::string_view> names) {
    for (std::string_view n : names) {
      if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
    }
  };
  if (scene == "conflict") add({"apologize", "empathize", "boundary"});
  else if (scene == "breakup") add({"space", "empathize", "boundary"});
  else if (scene == "ambiguous" || scene == "dating") add({"flirt", "humor", "curious"});
  else if (scene == "humor") add({"humor", "flirt"});
  else if (scene == "work") add({"reassure", "curious", "boundary"});
  else if (scene == "proposal") add({"empathize", "space", "flirt"});
  else if (scene == "social") add({"humor", "congratulate", "curious"});
  const std::string& e = analysis.emotion;
  if (e == "joy") add({"congratulate", "humor"});
  else if (e == "affection") add({"flirt", "empathize"});
  else if (e == "anger") add({"apologize", "empathize", "space"});
  else if (e == "sadness") add({"empathize", "reassure", "space"});
  else if (e == "anxiety") add({"reassure", "empathize"});
  else if (e == "disgust") add({"boundary", "space"});
  else if (e == "surprise") add({"curious", "humor"});
  add({"empathize", "curious", "reassure", "humor", "space"});
  size_t want = std::clamp<size_t>(static_cast<size_t>(reply_count) + 1, 3, kStrategies.size());
  std::vector<std::string> out;
  for (size_t i = 0; i < order.size() && out.size() < want; ++i) out.emplace_back(order[i]);
  for (const StrategyInfo& s : kStrategies) {  // reply_count 5 may need the rest too
    if (out.size() >= want) break;
    if (std::find(out.begin(), out.end(), s.name) == out.end()) out.emplace_back(s.name);
  }
  return out;
}

}  // namespace eq::engine::llm

#include "workers/engine/llm/answers.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include "common/json.h"

namespace eq::engine::llm {
namespace {

constexpr int kMaxDepth = 16;
// Longest text we accept in one field: a reply is a text message, not an
// essay, and a runaway generation should be repaired rather than shipped.
constexpr size_t kMaxTextBytes = 4000;

constexpr std::array<std::string_view, 8> kEmotions = {
    "joy", "affection", "anger", "sadness", "anxiety", "disgust", "surprise", "neutral"};
constexpr std::array<std::string_view, 10> kStages = {
    "stranger",  "acquaintance", "ambiguous",    "dating",    "committed",
    "strained",  "post_breakup", "colleague",    "family",    "unknown"};

Status bad(const std::string& what) { return Status(502, what); }

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// The object inside optional ``` fences (```json ... ```).
std::string_view unfence(std::string_view s) {
  s = trim(s);
  if (s.substr(0, 3) == "```") {
    size_t nl = s.find('\n');
    size_t end = s.rfind("```");
    if (nl != std::string_view::npos && end != std::string_view::npos && end > nl) {
      s = trim(s.substr(nl + 1, end - nl - 1));
    }
  }
  return s;
}

Status parseObject(std::string_view content, rapidjson::Document* doc) {
  std::string_view text = unfence(content);
  if (text.empty()) return bad("the answer was empty");
  if (Status s = json::parse(text, doc, kMaxDepth); !s.isOk()) {
    return bad("the answer is not valid JSON (" + s.msg() + ")");
  }
  if (!doc->IsObject()) return bad("the answer must be a JSON object");
  return Status::ok();
}

Status readText(const rapidjson::Value& obj, const char* name, const std::string& where,
                std::string* out) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) return bad(where + "\"" + name + "\" is missing");
  if (!it->value.IsString()) return bad(where + "\"" + name + "\" must be a string");
  std::string_view v = trim({it->value.GetString(), it->value.GetStringLength()});
  if (v.empty()) return bad(where + "\"" + name + "\" must not be empty");
  if (v.size() > kMaxTextBytes) return bad(where + "\"" + name + "\" is too long");
  *out = std::string(v);
  return Status::ok();
}

Status readUnit(const rapidjson::Value& obj, const char* name, const std::string& where,
                double* out) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) return bad(where + "\"" + name + "\" is missing");
  if (!it->value.IsNumber()) return bad(where + "\"" + name + "\" must be a number");
  double v = it->value.GetDouble();
  if (!std::isfinite(v) || v < 0.0 || v > 1.0) {
    return bad(where + "\"" + name + "\" must be between 0 and 1");
  }
  *out = v;
  return Status::ok();
}

template <size_t N>
Status readEnum(const rapidjson::Value& obj, const char* name,
                const std::array<std::string_view, N>& allowed, std::string* out) {
  std::string v;
  if (Status s = readText(obj, name, "", &v); !s.isOk()) return s;
  if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    return bad("\"" + std::string(name) + "\" must be one of " + list + ", not \"" + v + "\"");
  }
  *out = std::move(v);
  return Status::ok();
}

}  // namespace

Result<Completion> parseCompletion(std::string_view body) {
  rapidjson::Document doc;
  if (Status s = json::parse(body, &doc, 64); !s.isOk()) {
    return bad("llm: response is not JSON: " + s.msg());
  }
  if (!doc.IsObject()) return bad("llm: response is not a JSON object");
  auto choices = doc.FindMember("choices");
  if (choices == doc.MemberEnd() || !choices->value.IsArray() || choices->value.Empty() ||
      !choices->value[0].IsObject()) {
    return bad("llm: response has no choices");
  }
  const rapidjson::Value& choice = choices->value[0];
  auto message = choice.FindMember("message");
  if (message == choice.MemberEnd() || !message->value.IsObject()) {
    return bad("llm: response choice has no message");
  }
  Completion c;
  auto content = message->value.FindMember("content");
  if (content != message->value.MemberEnd() && content->value.IsString()) {
    c.content.assign(content->value.GetString(), content->value.GetStringLength());
  }
  c.finish_reason = json::getString(choice, "finish_reason");
  auto usage = doc.FindMember("usage");
  if (usage != doc.MemberEnd() && usage->value.IsObject()) {
    c.total_tokens = std::max<int64_t>(0, json::getInt(usage->value, "total_tokens"));
  }
  return c;
}

Result<Analysis> parseAnalysis(std::string_view content) {
  rapidjson::Document doc;
  if (Status s = parseObject(content, &doc); !s.isOk()) return s;
  Analysis a;
  if (Status s = readEnum(doc, "emotion", kEmotions, &a.emotion); !s.isOk()) return s;
  if (Status s = readUnit(doc, "intensity", "", &a.intensity); !s.isOk()) return s;
  if (Status s = readText(doc, "underlying_need", "", &a.underlying_need); !s.isOk()) return s;
  if (Status s = readEnum(doc, "relationship_stage", kStages, &a.relationship_stage); !s.isOk()) {
    return s;
  }
  if (Status s = readText(doc, "suggested_strategy", "", &a.suggested_strategy); !s.isOk()) {
    return s;
  }
  return a;
}

Result<std::vector<Reply>> parseReplies(std::string_view content, int count) {
  rapidjson::Document doc;
  if (Status s = parseObject(content, &doc); !s.isOk()) return s;
  auto arr = doc.FindMember("replies");
  if (arr == doc.MemberEnd() || !arr->value.IsArray()) {
    return bad("\"replies\" must be an array");
  }
  std::vector<Reply> out;
  std::set<std::string> seen;
  for (rapidjson::SizeType i = 0; i < arr->value.Size(); ++i) {
    const rapidjson::Value& item = arr->value[i];
    std::string where = "replies[" + std::to_string(i) + "].";
    if (!item.IsObject()) return bad("replies[" + std::to_string(i) + "] must be an object");
    Reply r;
    if (Status s = readText(item, "text", where, &r.text); !s.isOk()) return s;
    if (Status s = readUnit(item, "score", where, &r.score); !s.isOk()) return s;
    if (Status s = readText(item, "eq_analysis", where, &r.eq_analysis); !s.isOk()) return s;
    if (seen.insert(r.text).second) out.push_back(std::move(r));
  }
  if (out.size() < static_cast<size_t>(count)) {
    return bad("expected " + std::to_string(count) + " distinct replies, got " +
               std::to_string(out.size()));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Reply& a, const Reply& b) { return a.score > b.score; });
  out.resize(static_cast<size_t>(count));
  return out;
}

Result<Judgement> parseJudgement(std::string_view content, int candidates) {
  rapidjson::Document doc;
  if (Status s = parseObject(content, &doc); !s.isOk()) return s;
  Judgement j;
  if (Status s = readText(doc, "comparison", "", &j.comparison); !s.isOk()) return s;
  auto arr = doc.FindMember("ranking");
  if (arr == doc.MemberEnd() || !arr->value.IsArray()) return bad("\"ranking\" must be an array");
  std::set<int> seen;
  for (rapidjson::SizeType i = 0; i < arr->value.Size(); ++i) {
    const rapidjson::Value& item = arr->value[i];
    std::string where = "ranking[" + std::to_string(i) + "].";
    if (!item.IsObject()) return bad("ranking[" + std::to_string(i) + "] must be an object");
    auto id = item.FindMember("candidate");
    if (id == item.MemberEnd() || !id->value.IsInt() || id->value.GetInt() < 1 ||
        id->value.GetInt() > candidates) {
      return bad(where + "\"candidate\" must be an integer from 1 to " +
                 std::to_string(candidates));
    }
    Ranked r;
    r.candidate = id->value.GetInt();
    if (!seen.insert(r.candidate).second) {
      return bad("candidate " + std::to_string(r.candidate) + " is ranked twice");
    }
    if (Status s = readUnit(item, "score", where, &r.score); !s.isOk()) return s;
    if (Status s = readText(item, "reason", where, &r.reason); !s.isOk()) return s;
    j.ranking.push_back(std::move(r));
  }
  if (seen.size() != static_cast<size_t>(candidates)) {
    return bad("every one of the " + std::to_string(candidates) +
               " candidates must be ranked exactly once");
  }
  std::stable_sort(j.ranking.begin(), j.ranking.end(),
                   [](const Ranked& a, const Ranked& b) { return a.score > b.score; });
  return j;
}

}  // namespace eq::engine::llm

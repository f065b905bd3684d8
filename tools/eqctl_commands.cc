#include "tools/eqctl_commands.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>
#include <map>
#include <optional>

#include "common/defaults.h"
#include "common/timefmt.h"

namespace eq::tools {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

constexpr const char* kUsage =
    "usage: eqctl COMMAND\n"
    "  key create --name NAME [--tier free|pro|ultra] [--quota-fast N] [--quota-standard N]\n"
    "             [--quota-perfect N] [--expire-days N] [--rate N] [--json]\n"
    "  key list [--json]\n"
    "  key revoke KEY_ID\n"
    "  quota show KEY_ID [--json]\n"
    "  quota set KEY_ID --fast N --standard N --perfect N [--expire-days N] [--tier T]\n"
    "The database is EQ_DB_PATH; keys are minted for EQ_ENV (production: eq_live_, staging: "
    "eq_test_).\n";

// Parsed "--flag value" and "--flag" options plus positional arguments.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;
  bool json = false;
};

bool parseArgs(const std::vector<std::string>& in, size_t from, Args* out, std::ostream& err) {
  for (size_t i = from; i < in.size(); ++i) {
    const std::string& a = in[i];
    if (a == "--json") {
      out->json = true;
    } else if (a.rfind("--", 0) == 0) {
      if (i + 1 >= in.size()) {
        err << "eqctl: option " << a << " needs a value\n";
        return false;
      }
      out->options[a.substr(2)] = in[++i];
    } else {
      out->positional.push_back(a);
    }
  }
  return true;
}

// Reads an integer option in [lo, hi]; absent leaves *v unchanged.
bool intOption(const Args& a, const std::string& name, int64_t lo, int64_t hi, int64_t* v,
               std::ostream& err) {
  auto it = a.options.find(name);
  if (it == a.options.end()) return true;
  char* end = nullptr;
  long long n = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || n < lo || n > hi) {
    err << "eqctl: --" << name << " must be an integer from " << lo << " to " << hi << "\n";
    return false;
  }
  *v = n;
  return true;
}

bool checkKnown(const Args& a, std::initializer_list<const char*> known, std::ostream& err) {
  for (const auto& [k, v] : a.options) {
    bool ok = false;
    for (const char* n : known) ok = ok || k == n;
    if (!ok) {
      err << "eqctl: unknown option --" << k << "\n" << kUsage;
      return false;
    }
  }
  return true;
}

bool validTier(const std::string& t) { return t == "free" || t == "pro" || t == "ultra"; }

void putString(Writer& w, const char* k, const std::string& v) {
  w.Key(k);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

int keyCreate(Store& store, const std::string& env, const Args& a, std::ostream& out,
              std::ostream& err) {
  if (!checkKnown(a, {"name", "tier", "quota-fast", "quota-standard", "quota-perfect",
                      "expire-days", "rate"}, err)) {
    return 2;
  }
  NewKeyRequest req;
  req.env = env;
  auto name = a.options.find("name");
  if (name == a.options.end() || name->second.empty()) {
    err << "eqctl: key create needs --name\n";
    return 2;
  }
  req.name = name->second;
  if (auto t = a.options.find("tier"); t != a.options.end()) req.tier = t->second;
  if (!validTier(req.tier)) {
    err << "eqctl: --tier must be free, pro or ultra\n";
    return 2;
  }
  int64_t fast = defaults::kDefaultQuotaUnits, standard = fast, perfect = fast;
  int64_t days = defaults::kDefaultQuotaDays, rate = defaults::kDefaultRatePerMinute;
  constexpr int64_t kMax = 1'000'000'000;
  if (!intOption(a, "quota-fast", 0, kMax, &fast, err) ||
      !intOption(a, "quota-standard", 0, kMax, &standard, err) ||
      !intOption(a, "quota-perfect", 0, kMax, &perfect, err) ||
      !intOption(a, "expire-days", 1, 36500, &days, err) ||
      !intOption(a, "rate", 1, 1'000'000, &rate, err)) {
    return 2;
  }
  req.quota = QuotaUnits{fast, standard, perfect};
  req.expire_at_ms = nowMs() + days * 86'400'000;
  req.rate_limit_per_min = static_cast<int>(rate);
  Result<CreatedKey> k = store.createKey(req);
  if (!k.isOk()) {
    err << "eqctl: " << k.status().msg() << "\n";
    return 1;
  }
  const CreatedKey& c = k.value();
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "key_id", c.key_id);
    putString(w, "api_key", c.api_key);
    putString(w, "webhook_secret", c.webhook_secret);
    putString(w, "tier", c.tier);
    w.EndObject();
    out << sb.GetString() << "\n";
  } else {
    out << "key_id:         " << c.key_id << "\n"
        << "api_key:        " << c.api_key << "\n"
        << "webhook_secret: " << c.webhook_secret << "\n"
        << "tier:           " << c.tier << "\n"
        << "Store the api_key and webhook_secret now: they are shown only once.\n";
  }
  return 0;
}

int keyList(Store& store, const Args& a, std::ostream& out, std::ostream& err) {
  Result<std::vector<KeyInfo>> keys = store.listKeys();
  if (!keys.isOk()) {
    err << "eqctl: " << keys.status().msg() << "\n";
    return 1;
  }
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartArray();
    for (const KeyInfo& k : keys.value()) {
      w.StartObject();
      putString(w, "key_id", k.key_id);
      putString(w, "name", k.name);
      putString(w, "prefix", k.display_prefix);
      putString(w, "env", k.env);
      putString(w, "status", k.status);
      putString(w, "tier", k.tier);
      putString(w, "created_at", iso8601(k.created_at));
      w.EndObject();
    }
    w.EndArray();
    out << sb.GetString() << "\n";
    return 0;
  }
  char line[256];
  std::snprintf(line, sizeof line, "%-30s %-18s %-10s %-8s %-6s %s\n", "KEY_ID", "PREFIX",
                "ENV", "STATUS", "TIER", "NAME");
  out << line;
  for (const KeyInfo& k : keys.value()) {
    std::snprintf(line, sizeof line, "%-30s %-18s %-10s %-8s %-6s %s\n", k.key_id.c_str(),
                  (k.display_prefix + "...").c_str(), k.env.c_str(), k.status.c_str(),
                  k.tier.c_str(), k.name.c_str());
    out << line;
  }
  return 0;
}

int quotaShow(Store& store, const std::string& account, const Args& a, std::ostream& out,
              std::ostream& err) {
  Result<AccountQuota> q = store.quota(account);
  if (!q.isOk()) {
    err << "eqctl: " << q.status().msg() << "\n";
    return 1;
  }
  const AccountQuota& v = q.value();
  if (a.json) {
    out << "{\"quota\":{\"fast\":" << v.remaining.fast << ",\"standard\":" << v.remaining.standard
        << ",\"perfect\":" << v.remaining.perfect << "},\"expire_at\":\""
        << iso8601Offset(v.expire_at_ms) << "\",\"tier\":\"" << v.tier << "\"}\n";
  } else {
    out << "fast:      " << v.remaining.fast << "\n"
        << "standard:  " << v.remaining.standard << "\n"
        << "perfect:   " << v.remaining.perfect << "\n"
        << "expire_at: " << iso8601Offset(v.expire_at_ms) << "\n"
        << "tier:      " << v.tier << "\n";
  }
  return 0;
}

int quotaSet(Store& store, const std::string& account, const Args& a, std::ostream& out,
             std::ostream& err) {
  if (!checkKnown(a, {"fast", "standard", "perfect", "expire-days", "tier"}, err)) return 2;
  Result<AccountQuota> cur = store.quota(account);
  if (!cur.isOk()) {
    err << "eqctl: " << cur.status().msg() << "\n";
    return 1;
  }
  QuotaUnits u = cur.value().remaining;
  int64_t days = 0;
  constexpr int64_t kMax = 1'000'000'000;
  if (!intOption(a, "fast", 0, kMax, &u.fast, err) ||
      !intOption(a, "standard", 0, kMax, &u.standard, err) ||
      !intOption(a, "perfect", 0, kMax, &u.perfect, err) ||
      !intOption(a, "expire-days", 1, 36500, &days, err)) {
    return 2;
  }
  std::optional<int64_t> expire;
  if (days > 0) expire = nowMs() + days * 86'400'000;
  std::optional<std::string> tier;
  if (auto t = a.options.find("tier"); t != a.options.end()) {
    if (!validTier(t->second)) {
      err << "eqctl: --tier must be free, pro or ultra\n";
      return 2;
    }
    tier = t->second;
  }
  if (Status s = store.setQuota(account, u, expire, tier); !s.isOk()) {
    err << "eqctl: " << s.msg() << "\n";
    return 1;
  }
  return quotaShow(store, account, a, out, err);
}

}  // namespace

int runEqctl(Store& store, const std::string& env, const std::vector<std::string>& args,
             std::ostream& out, std::ostream& err) {
  if (args.size() < 2) {
    err << kUsage;
    return 2;
  }
  const std::string& noun = args[0];
  const std::string& verb = args[1];
  Args a;
  if (!parseArgs(args, 2, &a, err)) return 2;

  if (noun == "key" && verb == "create") return keyCreate(store, env, a, out, err);
  if (noun == "key" && verb == "list") return keyList(store, a, out, err);
  if ((noun == "key" && verb == "revoke") || noun == "quota") {
    if (a.positional.size() != 1) {
      err << "eqctl: " << noun << " " << verb << " needs one KEY_ID\n" << kUsage;
      return 2;
    }
    const std::string& key_id = a.positional[0];
    if (noun == "key") {
      if (Status s = store.revokeKey(key_id); !s.isOk()) {
        err << "eqctl: " << s.msg() << "\n";
        return 1;
      }
      out << "revoked " << key_id << "\n";
      return 0;
    }
    Result<std::string> account = store.accountOfKey(key_id);
    if (!account.isOk()) {
      err << "eqctl: " << account.status().msg() << "\n";
      return 1;
    }
    if (verb == "show") return quotaShow(store, account.value(), a, out, err);
    if (verb == "set") return quotaSet(store, account.value(), a, out, err);
  }
  err << "eqctl: unknown command '" << noun << " " << verb << "'\n" << kUsage;
  return 2;
}

}  // namespace eq::tools

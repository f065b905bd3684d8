#include "tools/eqctl_commands.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>
#include <set>

#include "common/defaults.h"
#include "common/netaddr.h"
#include "common/timefmt.h"

namespace eq::tools {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

constexpr int64_t kDayMs = 86'400'000;
constexpr int64_t kMaxUnits = 1'000'000'000;
constexpr int64_t kMaxDays = 36'500;

constexpr const char* kUsage =
    "usage: eqctl COMMAND\n"
    "  key create --name NAME [--tier free|pro|ultra] [--quota-fast N] [--quota-standard N]\n"
    "             [--quota-perfect N] [--expire-days N] [--rate N] [--json]\n"
    "             (--expire-days: of the quota, default 30)\n"
    "  key list [--json]                 prefixes only, never full keys\n"
    "  key show KEY_ID [--json]\n"
    "  key revoke KEY_ID\n"
    "  key rotate KEY_ID [--expire-days N | --expire-at ISO8601 | --no-expiry] [--json]\n"
    "             new key for the same account (quota, tasks, webhook secret and rate limit\n"
    "             stay); the old key stops at once; the new key is printed once\n"
    "  key set KEY_ID [--rate N] [--tier T] [--webhook-url URL | --no-webhook-url]\n"
    "             [--expire-days N | --expire-at ISO8601 | --no-expiry] [--json]\n"
    "             (--expire-*: of the key itself; an expired key is refused like a revoked one)\n"
    "  quota show KEY_ID [--json]\n"
    "  quota set KEY_ID [--fast N] [--standard N] [--perfect N]\n"
    "             [--expire-days N | --expire-at ISO8601] [--tier T] [--json]\n"
    "  quota grant KEY_ID [--fast N] [--standard N] [--perfect N]\n"
    "             [--expire-days N | --expire-at ISO8601] [--json]    adds units\n"
    "  delivery list [--failed | --status pending|delivered|failed] [--task TASK_ID]\n"
    "             [--limit N] [--json]          webhook deliveries, newest first (default 100)\n"
    "  delivery show DELIVERY_ID [--json]       with every attempt (time, status, latency, error)\n"
    "  delivery replay DELIVERY_ID [--json]     a delivered or failed delivery is sent again now,\n"
    "             same delivery id, on a fresh retry schedule; attempts keep counting\n"
    "Rate limit, tier, default webhook URL and quota belong to the key's account, so they\n"
    "survive a rotation. --expire-at takes UTC times such as 2026-01-31T00:00:00Z and may lie\n"
    "in the past (ends a quota or key now).\n"
    "The database is EQ_DB_PATH; keys are minted for EQ_ENV (production: eq_live_, staging: "
    "eq_test_).\n";

// Options that take no value.
const std::set<std::string> kFlags = {"json", "no-webhook-url", "no-expiry", "failed"};

// Parsed "--flag value" and "--flag" options plus positional arguments.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;
  std::set<std::string> flags;
  bool json = false;

  bool has(const std::string& name) const {
    return options.count(name) != 0 || flags.count(name) != 0;
  }
};

bool parseArgs(const std::vector<std::string>& in, size_t from, Args* out, std::ostream& err) {
  for (size_t i = from; i < in.size(); ++i) {
    const std::string& a = in[i];
    if (a.rfind("--", 0) == 0 && kFlags.count(a.substr(2)) != 0) {
      out->flags.insert(a.substr(2));
      out->json = out->json || a == "--json";
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
  auto isKnown = [&](const std::string& k) {
    for (const char* n : known) {
      if (k == n) return true;
    }
    return k == "json";
  };
  for (const auto& [k, v] : a.options) {
    if (!isKnown(k)) {
      err << "eqctl: unknown option --" << k << "\n" << kUsage;
      return false;
    }
  }
  for (const std::string& k : a.flags) {
    if (!isKnown(k)) {
      err << "eqctl: unknown option --" << k << "\n" << kUsage;
      return false;
    }
  }
  return true;
}

bool validTier(const std::string& t) { return t == "free" || t == "pro" || t == "ultra"; }

// --expire-days N or --expire-at T (or, when allowed, --no-expiry, which
// yields 0). nullopt in *out: none given. False on a usage error.
bool expiryOption(const Args& a, bool allow_never, std::optional<int64_t>* out,
                  std::ostream& err) {
  int given = a.has("expire-days") + a.has("expire-at") + a.has("no-expiry");
  if (given > 1) {
    err << "eqctl: give only one of --expire-days, --expire-at"
        << (allow_never ? ", --no-expiry" : "") << "\n";
    return false;
  }
  if (a.has("expire-days")) {
    int64_t days = 0;
    if (!intOption(a, "expire-days", 1, kMaxDays, &days, err)) return false;
    *out = nowMs() + days * kDayMs;
  } else if (a.has("expire-at")) {
    int64_t at = 0;
    if (!parseIso8601(a.options.at("expire-at"), &at)) {
      err << "eqctl: --expire-at must be an ISO 8601 UTC time such as 2026-01-31T00:00:00Z\n";
      return false;
    }
    *out = at;
  } else if (a.has("no-expiry")) {
    if (!allow_never) {
      err << "eqctl: --no-expiry is not allowed here\n";
      return false;
    }
    *out = 0;
  }
  return true;
}

void putString(Writer& w, const char* k, const std::string& v) {
  w.Key(k);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

void putOptString(Writer& w, const char* k, const std::string& v) {
  w.Key(k);
  if (v.empty()) w.Null(); else w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

void putOptTime(Writer& w, const char* k, int64_t ms) {
  putOptString(w, k, ms == 0 ? std::string() : iso8601Offset(ms));
}

int fail(const Status& s, std::ostream& err) {
  err << "eqctl: " << s.msg() << "\n";
  return 1;
}

int keyCreate(Store& store, const EqctlOptions& opts, const Args& a, std::ostream& out,
              std::ostream& err) {
  if (!checkKnown(a, {"name", "tier", "quota-fast", "quota-standard", "quota-perfect",
                      "expire-days", "rate"}, err)) {
    return 2;
  }
  NewKeyRequest req;
  req.env = opts.env;
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
  if (!intOption(a, "quota-fast", 0, kMaxUnits, &fast, err) ||
      !intOption(a, "quota-standard", 0, kMaxUnits, &standard, err) ||
      !intOption(a, "quota-perfect", 0, kMaxUnits, &perfect, err) ||
      !intOption(a, "expire-days", 1, kMaxDays, &days, err) ||
      !intOption(a, "rate", 1, 1'000'000, &rate, err)) {
    return 2;
  }
  req.quota = QuotaUnits{fast, standard, perfect};
  req.expire_at_ms = nowMs() + days * kDayMs;
  req.rate_limit_per_min = static_cast<int>(rate);
  Result<CreatedKey> k = store.createKey(req);
  if (!k.isOk()) return fail(k.status(), err);
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
  if (!keys.isOk()) return fail(keys.status(), err);
  int64_t now = nowMs();
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
      putString(w, "status", keyStatusAt(k, now));
      putString(w, "tier", k.tier);
      putString(w, "created_at", iso8601(k.created_at));
      putOptTime(w, "expires_at", k.expires_at);
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
                  (k.display_prefix + "...").c_str(), k.env.c_str(),
                  keyStatusAt(k, now).c_str(), k.tier.c_str(), k.name.c_str());
    out << line;
  }
  return 0;
}

int keyShow(Store& store, const std::string& key_id, const Args& a, std::ostream& out,
            std::ostream& err) {
  Result<KeyDetails> d = store.keyDetails(key_id);
  if (!d.isOk()) return fail(d.status(), err);
  const KeyDetails& k = d.value();
  std::string status = keyStatusAt(k.key, nowMs());
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "key_id", k.key.key_id);
    putString(w, "account_id", k.key.account_id);
    putString(w, "name", k.key.name);
    putString(w, "prefix", k.key.display_prefix);
    putString(w, "env", k.key.env);
    putString(w, "status", status);
    putString(w, "tier", k.key.tier);
    putString(w, "created_at", iso8601Offset(k.key.created_at));
    putOptTime(w, "expires_at", k.key.expires_at);
    putOptTime(w, "revoked_at", k.revoked_at);
    putOptString(w, "rotated_to", k.rotated_to);
    w.Key("rate_limit_per_min");
    w.Int(k.rate_limit_per_min);
    putOptString(w, "default_webhook_url", k.default_webhook_url);
    w.Key("quota");
    w.StartObject();
    w.Key("fast");
    w.Int64(k.quota.remaining.fast);
    w.Key("standard");
    w.Int64(k.quota.remaining.standard);
    w.Key("perfect");
    w.Int64(k.quota.remaining.perfect);
    w.EndObject();
    putString(w, "quota_expire_at", iso8601Offset(k.quota.expire_at_ms));
    w.EndObject();
    out << sb.GetString() << "\n";
    return 0;
  }
  auto orNone = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  out << "key_id:              " << k.key.key_id << "\n"
      << "account_id:          " << k.key.account_id << "\n"
      << "name:                " << k.key.name << "\n"
      << "prefix:              " << k.key.display_prefix << "...\n"
      << "env:                 " << k.key.env << "\n"
      << "status:              " << status << "\n"
      << "tier:                " << k.key.tier << "\n"
      << "created_at:          " << iso8601Offset(k.key.created_at) << "\n"
      << "expires_at:          "
      << (k.key.expires_at == 0 ? "never" : iso8601Offset(k.key.expires_at)) << "\n"
      << "revoked_at:          "
      << (k.revoked_at == 0 ? std::string("-") : iso8601Offset(k.revoked_at)) << "\n"
      << "rotated_to:          " << orNone(k.rotated_to) << "\n"
      << "rate_limit_per_min:  " << k.rate_limit_per_min << "\n"
      << "default_webhook_url: " << orNone(k.default_webhook_url) << "\n"
      << "quota:               fast " << k.quota.remaining.fast << ", standard "
      << k.quota.remaining.standard << ", perfect " << k.quota.remaining.perfect << "\n"
      << "quota_expire_at:     " << iso8601Offset(k.quota.expire_at_ms) << "\n";
  return 0;
}

int keyRotate(Store& store, const std::string& key_id, const Args& a, std::ostream& out,
              std::ostream& err) {
  if (!checkKnown(a, {"expire-days", "expire-at", "no-expiry"}, err)) return 2;
  std::optional<int64_t> expires;
  if (!expiryOption(a, true, &expires, err)) return 2;
  int64_t now = nowMs();
  Result<CreatedKey> k = store.rotateKey(key_id, expires, now);
  if (!k.isOk()) return fail(k.status(), err);
  const CreatedKey& c = k.value();
  // The webhook secret is the account's and does not change, so it is not
  // printed again: it was shown once, when the account's first key was made.
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "key_id", c.key_id);
    putString(w, "api_key", c.api_key);
    putString(w, "tier", c.tier);
    w.EndObject();
    out << sb.GetString() << "\n";
  } else {
    out << "key_id:  " << c.key_id << "\n"
        << "api_key: " << c.api_key << "\n"
        << "tier:    " << c.tier << "\n"
        << "Revoked " << key_id << ". Store the api_key now: it is shown only once. Quota, "
        << "tasks, rate limit and the webhook secret are unchanged.\n";
  }
  // A carried-over expiry in the past would hand out a key that is already
  // refused; say so rather than leave the operator puzzled by 401s.
  Result<KeyDetails> d = store.keyDetails(c.key_id);
  if (d.isOk() && d.value().key.expires_at != 0 && d.value().key.expires_at <= now) {
    err << "eqctl: warning: the new key inherited an expiry in the past ("
        << iso8601Offset(d.value().key.expires_at) << "); extend it with eqctl key set "
        << c.key_id << " --expire-days N\n";
  }
  return 0;
}

int keySet(Store& store, const EqctlOptions& opts, const std::string& key_id, const Args& a,
           std::ostream& out, std::ostream& err) {
  if (!checkKnown(a, {"rate", "tier", "webhook-url", "no-webhook-url", "expire-days",
                      "expire-at", "no-expiry"}, err)) {
    return 2;
  }
  KeyUpdate u;
  int64_t rate = 0;
  if (!intOption(a, "rate", 1, 1'000'000, &rate, err)) return 2;
  if (rate > 0) u.rate_limit_per_min = static_cast<int>(rate);
  if (auto t = a.options.find("tier"); t != a.options.end()) {
    if (!validTier(t->second)) {
      err << "eqctl: --tier must be free, pro or ultra\n";
      return 2;
    }
    u.tier = t->second;
  }
  if (a.has("webhook-url") && a.has("no-webhook-url")) {
    err << "eqctl: give --webhook-url or --no-webhook-url, not both\n";
    return 2;
  }
  if (auto url = a.options.find("webhook-url"); url != a.options.end()) {
    if (Status s = net::checkWebhookUrl(url->second, opts.webhook_allow); !s.isOk()) {
      err << "eqctl: --webhook-url: " << s.msg() << "\n";
      return 2;
    }
    u.default_webhook_url = url->second;
  } else if (a.has("no-webhook-url")) {
    u.default_webhook_url = "";
  }
  if (!expiryOption(a, true, &u.expires_at_ms, err)) return 2;
  if (!u.rate_limit_per_min && !u.tier && !u.default_webhook_url && !u.expires_at_ms) {
    err << "eqctl: key set needs at least one setting to change\n" << kUsage;
    return 2;
  }
  if (Status s = store.updateKey(key_id, u); !s.isOk()) return fail(s, err);
  return keyShow(store, key_id, a, out, err);
}

int quotaShow(Store& store, const std::string& account, const Args& a, std::ostream& out,
              std::ostream& err) {
  Result<AccountQuota> q = store.quota(account);
  if (!q.isOk()) return fail(q.status(), err);
  const AccountQuota& v = q.value();
  if (a.json) {
    out << "{\"quota\":{\"fast\":" << v.remaining.fast << ",\"standard\":" << v.remaining.standard
        << ",\"perfect\":" << v.remaining.perfect << "},\"expire_at\":\""
        << iso8601Offset(v.expire_at_ms) << "\",\"tier\":\"" << v.tier << "\"}\n";
  } else {
    out << "fast:      " << v.remaining.fast << "\n"
        << "standard:  " << v.remaining.standard << "\n"
        << "perfect:   " << v.remaining.perfect << "\n"
        << "expire_at: " << iso8601Offset(v.expire_at_ms)
        << (v.expire_at_ms <= nowMs() ? " (expired)" : "") << "\n"
        << "tier:      " << v.tier << "\n";
  }
  return 0;
}

int quotaSet(Store& store, const std::string& account, const Args& a, std::ostream& out,
             std::ostream& err) {
  if (!checkKnown(a, {"fast", "standard", "perfect", "expire-days", "expire-at", "tier"}, err)) {
    return 2;
  }
  QuotaChange u;
  for (auto [name, slot] : {std::pair{"fast", &u.fast}, std::pair{"standard", &u.standard},
                            std::pair{"perfect", &u.perfect}}) {
    int64_t v = 0;
    if (!intOption(a, name, 0, kMaxUnits, &v, err)) return 2;
    if (a.has(name)) *slot = v;
  }
  std::optional<int64_t> expire;
  if (!expiryOption(a, false, &expire, err)) return 2;
  std::optional<std::string> tier;
  if (auto t = a.options.find("tier"); t != a.options.end()) {
    if (!validTier(t->second)) {
      err << "eqctl: --tier must be free, pro or ultra\n";
      return 2;
    }
    tier = t->second;
  }
  if (Status s = store.setQuota(account, u, expire, tier); !s.isOk()) return fail(s, err);
  return quotaShow(store, account, a, out, err);
}

int quotaGrant(Store& store, const std::string& account, const Args& a, std::ostream& out,
               std::ostream& err) {
  if (!checkKnown(a, {"fast", "standard", "perfect", "expire-days", "expire-at"}, err)) return 2;
  QuotaUnits add;
  if (!intOption(a, "fast", 0, kMaxUnits, &add.fast, err) ||
      !intOption(a, "standard", 0, kMaxUnits, &add.standard, err) ||
      !intOption(a, "perfect", 0, kMaxUnits, &add.perfect, err)) {
    return 2;
  }
  std::optional<int64_t> expire;
  if (!expiryOption(a, false, &expire, err)) return 2;
  if (!a.has("fast") && !a.has("standard") && !a.has("perfect") && !expire) {
    err << "eqctl: quota grant needs --fast, --standard, --perfect or an expiry\n" << kUsage;
    return 2;
  }
  if (Status s = store.grantQuota(account, add, expire); !s.isOk()) return fail(s, err);
  int rc = quotaShow(store, account, a, out, err);
  Result<AccountQuota> now = store.quota(account);
  if (rc == 0 && now.isOk() && now.value().expire_at_ms <= nowMs()) {
    err << "eqctl: warning: this quota has expired, so the units cannot be used until it is "
           "extended (--expire-days N)\n";
  }
  return rc;
}

// ---------------------------------------------------------------- deliveries

void putDelivery(Writer& w, const DeliveryRecord& d) {
  putString(w, "delivery_id", d.delivery_id);
  putString(w, "task_id", d.task_id);
  putString(w, "url", d.url);
  putString(w, "event", d.event);
  putString(w, "status", d.status);
  w.Key("attempts");
  w.Int(d.attempts);
  putOptString(w, "last_attempt_at", d.last_attempt_at == 0 ? "" : iso8601(d.last_attempt_at));
  w.Key("last_status");
  if (d.last_status > 0) w.Int(d.last_status); else w.Null();
  putOptString(w, "last_error", d.last_error);
  putOptString(w, "next_attempt_at", d.next_attempt_at == 0 ? "" : iso8601(d.next_attempt_at));
  putString(w, "created_at", iso8601(d.created_at));
  putOptString(w, "replayed_at", d.replayed_at == 0 ? "" : iso8601(d.replayed_at));
}

std::string orDash(const std::string& s) { return s.empty() ? "-" : s; }
std::string timeOrDash(int64_t ms) { return ms == 0 ? "-" : iso8601(ms); }

int deliveryList(Store& store, const Args& a, std::ostream& out, std::ostream& err) {
  if (!checkKnown(a, {"failed", "status", "task", "limit"}, err)) return 2;
  if (!a.positional.empty()) {
    err << "eqctl: delivery list takes no positional arguments\n" << kUsage;
    return 2;
  }
  DeliveryFilter f;
  if (a.has("failed") && a.has("status")) {
    err << "eqctl: give --failed or --status, not both\n";
    return 2;
  }
  if (a.has("failed")) f.status = "failed";
  if (auto st = a.options.find("status"); st != a.options.end()) {
    if (st->second != "pending" && st->second != "delivered" && st->second != "failed") {
      err << "eqctl: --status must be pending, delivered or failed\n";
      return 2;
    }
    f.status = st->second;
  }
  if (auto t = a.options.find("task"); t != a.options.end()) f.task_id = t->second;
  int64_t limit = f.limit;
  if (!intOption(a, "limit", 1, 10'000, &limit, err)) return 2;
  f.limit = static_cast<int>(limit);
  Result<std::vector<DeliveryRecord>> list = store.listDeliveries(f);
  if (!list.isOk()) return fail(list.status(), err);
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartArray();
    for (const DeliveryRecord& d : list.value()) {
      w.StartObject();
      putDelivery(w, d);
      w.EndObject();
    }
    w.EndArray();
    out << sb.GetString() << "\n";
    return 0;
  }
  char line[512];
  std::snprintf(line, sizeof line, "%-30s %-30s %-9s %8s %4s %-24s %-24s %s\n", "DELIVERY_ID",
                "TASK_ID", "STATUS", "ATTEMPTS", "LAST", "LAST_ATTEMPT_AT", "NEXT_ATTEMPT_AT",
                "URL");
  out << line;
  for (const DeliveryRecord& d : list.value()) {
    std::snprintf(line, sizeof line, "%-30s %-30s %-9s %8d %4s %-24s %-24s ",
                  d.delivery_id.c_str(), d.task_id.c_str(), d.status.c_str(), d.attempts,
                  d.last_status > 0 ? std::to_string(d.last_status).c_str() : "-",
                  timeOrDash(d.last_attempt_at).c_str(), timeOrDash(d.next_attempt_at).c_str());
    out << line << d.url << "\n";
  }
  return 0;
}

int deliveryShow(Store& store, const std::string& id, const Args& a, std::ostream& out,
                 std::ostream& err) {
  if (!checkKnown(a, {}, err)) return 2;
  Result<std::optional<DeliveryRecord>> d = store.delivery(id);
  if (!d.isOk()) return fail(d.status(), err);
  if (!d.value()) return fail(Status(404, "no delivery " + id), err);
  Result<std::vector<DeliveryAttempt>> attempts = store.deliveryAttempts(id);
  if (!attempts.isOk()) return fail(attempts.status(), err);
  const DeliveryRecord& r = *d.value();
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putDelivery(w, r);
    w.Key("attempt_log");
    w.StartArray();
    for (const DeliveryAttempt& at : attempts.value()) {
      w.StartObject();
      w.Key("attempt");
      w.Int(at.number);
      putString(w, "at", iso8601(at.at));
      w.Key("http_status");
      if (at.http_status > 0) w.Int(at.http_status); else w.Null();
      w.Key("latency_ms");
      w.Int64(at.latency_ms);
      putOptString(w, "error", at.error);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    out << sb.GetString() << "\n";
    return 0;
  }
  out << "delivery_id:     " << r.delivery_id << "\n"
      << "task_id:         " << r.task_id << "\n"
      << "url:             " << r.url << "\n"
      << "event:           " << r.event << "\n"
      << "status:          " << r.status << "\n"
      << "attempts:        " << r.attempts << "\n"
      << "next_attempt_at: " << timeOrDash(r.next_attempt_at) << "\n"
      << "created_at:      " << iso8601(r.created_at) << "\n"
      << "replayed_at:     " << timeOrDash(r.replayed_at) << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%7s  %-24s %6s %10s  %s\n", "ATTEMPT", "AT", "STATUS",
                "LATENCY_MS", "ERROR");
  out << line;
  for (const DeliveryAttempt& at : attempts.value()) {
    std::snprintf(line, sizeof line, "%7d  %-24s %6s %10lld  ", at.number, iso8601(at.at).c_str(),
                  at.http_status > 0 ? std::to_string(at.http_status).c_str() : "-",
                  static_cast<long long>(at.latency_ms));
    out << line << orDash(at.error) << "\n";
  }
  return 0;
}

int deliveryReplay(Store& store, const std::string& id, const Args& a, std::ostream& out,
                   std::ostream& err) {
  if (!checkKnown(a, {}, err)) return 2;
  Result<DeliveryRecord> d = store.replayDelivery(id, nowMs());
  if (!d.isOk()) return fail(d.status(), err);
  const DeliveryRecord& r = d.value();
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putDelivery(w, r);
    w.EndObject();
    out << sb.GetString() << "\n";
  } else {
    out << "replayed " << r.delivery_id << " (task " << r.task_id << "): pending, due now; "
        << "the dispatcher sends it as attempt " << r.attempts + 1 << " with the same delivery id\n";
  }
  return 0;
}

}  // namespace

bool parseIso8601(const std::string& text, int64_t* unix_ms) {
  // Fixed-position fields, read by hand: sscanf's %d would also take signs
  // and spaces ("2026- 1-01").
  const char* p = text.c_str();
  auto digits = [&p](int n, int* out) {
    int v = 0;
    for (int i = 0; i < n; ++i) {
      if (p[i] < '0' || p[i] > '9') return false;
      v = v * 10 + (p[i] - '0');
    }
    *out = v;
    p += n;
    return true;
  };
  auto expect = [&p](char c) { return *p == c ? (++p, true) : false; };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!digits(4, &y) || !expect('-') || !digits(2, &mo) || !expect('-') || !digits(2, &d)) {
    return false;
  }
  int64_t frac_ms = 0, offset_min = 0;
  if (expect('T') || expect('t')) {
    if (!digits(2, &h) || !expect(':') || !digits(2, &mi) || !expect(':') || !digits(2, &s)) {
      return false;
    }
    if (expect('.')) {
      int n = 0;
      for (; *p >= '0' && *p <= '9'; ++p, ++n) {
        if (n < 3) frac_ms = frac_ms * 10 + (*p - '0');
      }
      if (n == 0) return false;
      for (int i = n; i < 3; ++i) frac_ms *= 10;
    }
    if (expect('Z') || expect('z')) {
      // UTC
    } else if (*p == '+' || *p == '-') {
      int sign = *p++ == '-' ? -1 : 1;
      int oh = 0, om = 0;
      if (!digits(2, &oh) || !expect(':') || !digits(2, &om) || oh > 23 || om > 59) return false;
      offset_min = sign * (oh * 60 + om);
    } else {
      return false;  // a time without a zone would be read in some zone; refuse to guess
    }
  }
  if (*p != '\0' || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
      s > 59) {
    return false;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  time_t t = timegm(&tm);
  // timegm normalises 2026-02-31 to March; a date that moved was not real.
  if (tm.tm_mday != d || tm.tm_mon != mo - 1) return false;
  *unix_ms = (static_cast<int64_t>(t) - offset_min * 60) * 1000 + frac_ms;
  return true;
}

int runEqctl(Store& store, const EqctlOptions& opts, const std::vector<std::string>& args,
             std::ostream& out, std::ostream& err) {
  if (args.size() < 2) {
    err << kUsage;
    return 2;
  }
  const std::string& noun = args[0];
  const std::string& verb = args[1];
  Args a;
  if (!parseArgs(args, 2, &a, err)) return 2;

  if (noun == "key" && verb == "create") return keyCreate(store, opts, a, out, err);
  if (noun == "key" && verb == "list") return keyList(store, a, out, err);

  if (noun == "delivery" && verb == "list") return deliveryList(store, a, out, err);
  if (noun == "delivery" && (verb == "show" || verb == "replay")) {
    if (a.positional.size() != 1) {
      err << "eqctl: delivery " << verb << " needs one DELIVERY_ID\n" << kUsage;
      return 2;
    }
    if (verb == "show") return deliveryShow(store, a.positional[0], a, out, err);
    return deliveryReplay(store, a.positional[0], a, out, err);
  }

  bool key_verb = verb == "show" || verb == "revoke" || verb == "rotate" || verb == "set";
  bool quota_verb = verb == "show" || verb == "set" || verb == "grant";
  if ((noun == "key" && key_verb) || (noun == "quota" && quota_verb)) {
    if (a.positional.size() != 1) {
      err << "eqctl: " << noun << " " << verb << " needs one KEY_ID\n" << kUsage;
      return 2;
    }
    const std::string& key_id = a.positional[0];
    if (noun == "key") {
      if (verb == "show") return keyShow(store, key_id, a, out, err);
      if (verb == "rotate") return keyRotate(store, key_id, a, out, err);
      if (verb == "set") return keySet(store, opts, key_id, a, out, err);
      if (Status s = store.revokeKey(key_id); !s.isOk()) return fail(s, err);
      out << "revoked " << key_id << "\n";
      return 0;
    }
    Result<std::string> account = store.accountOfKey(key_id);
    if (!account.isOk()) return fail(account.status(), err);
    if (verb == "show") return quotaShow(store, account.value(), a, out, err);
    if (verb == "set") return quotaSet(store, account.value(), a, out, err);
    return quotaGrant(store, account.value(), a, out, err);
  }
  err << "eqctl: unknown command '" << noun << " " << verb << "'\n" << kUsage;
  return 2;
}

}  // namespace eq::tools

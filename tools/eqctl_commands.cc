#include "tools/eqctl_commands.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "common/defaults.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/netaddr.h"
#include "common/timefmt.h"
#include "common/utf8.h"
#include "store/db.h"
#include "store/migrations.h"
#include "tools/reports.h"

namespace eq::tools {
namespace {

using json::putString;
using json::Writer;

constexpr int64_t kDayMs = 86'400'000;
constexpr int64_t kMaxUnits = 1'000'000'000;
constexpr int64_t kMaxDays = 36'500;
constexpr int64_t kMaxListLimit = 10'000;
// stats looks back an hour unless told otherwise, and at most a week: older
// tasks are purged after EQ_RETENTION_DAYS (7 by default) anyway.
constexpr int64_t kStatsDefaultMinutes = 60;
constexpr int64_t kStatsMaxMinutes = 7 * 24 * 60;
// The longest a rotated key keeps working beside the new one.
constexpr int64_t kMaxOverlapMs = 30 * kDayMs;

// Options that take no value.
const std::set<std::string> kFlags = {"json", "no-webhook-url", "no-expiry", "failed", "force"};

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

// "90s", "45m", "24h", "7d": a whole number and its unit; nullopt for
// anything else (and for a count that would overflow).
std::optional<int64_t> parseDurationMs(std::string_view text) {
  if (text.size() < 2) return std::nullopt;
  int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1'000;
      break;
    case 'm':
      unit = 60'000;
      break;
    case 'h':
      unit = 3'600'000;
      break;
    case 'd':
      unit = kDayMs;
      break;
    default:
      return std::nullopt;
  }
  text.remove_suffix(1);
  int64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || n > 1'000'000'000) return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n * unit;
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
      err << "eqctl: unknown option --" << k << "\n";
      return false;
    }
  }
  for (const std::string& k : a.flags) {
    if (!isKnown(k)) {
      err << "eqctl: unknown option --" << k << "\n";
      return false;
    }
  }
  return true;
}

bool validTier(const std::string& t) { return t == "free" || t == "pro" || t == "ultra"; }

// --expire-days N or --expire-at T (or, when allowed, --no-expiry, which
// yields 0). nullopt in *out: none given. False on a usage error.
bool expiryOption(const Args& a, bool allow_never, std::optional<int64_t>* out, std::ostream& err) {
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

void putOptString(Writer& w, const char* k, const std::string& v) {
  w.Key(k);
  if (v.empty())
    w.Null();
  else
    w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

void putOptTime(Writer& w, const char* k, int64_t ms) {
  putOptString(w, k, ms == 0 ? std::string() : iso8601Offset(ms));
}

// Store errors carry HTTP-style codes; scripts get them as distinct exit codes.
int fail(const Status& s, std::ostream& err) {
  err << "eqctl: " << s.msg() << "\n";
  switch (s.code()) {
    case 400:
      return kExitUsage;
    case 404:
      return kExitNotFound;
    case 409:
      return kExitConflict;
    default:
      return kExitError;
  }
}

// A plain-text table whose columns are as wide as their widest cell, so
// listings line up whatever the ids and URLs look like. The last column is
// not padded (it is usually a URL or a message of any length).
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  // Cells may hold what people typed (key names, URLs, errors): a control
  // or bidirectional-formatting character would act on the terminal, so it
  // is shown escaped.
  void add(std::vector<std::string> row) {
    for (std::string& cell : row) cell = utf8::escapeDisplayControls(cell);
    rows_.push_back(std::move(row));
  }
  void print(std::ostream& out) const {
    std::vector<size_t> width;
    for (const auto& row : rows_) {
      if (width.size() < row.size()) width.resize(row.size(), 0);
      for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], displayWidth(row[i]));
    }
    for (const auto& row : rows_) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) {
        line += row[i];
        if (i + 1 < row.size()) line.append(width[i] - displayWidth(row[i]) + 2, ' ');
      }
      out << line << "\n";
    }
  }

 private:
  // Code points, not bytes: names may be Chinese. (Wide characters still
  // take two terminal cells; close enough for an operator's listing.)
  static size_t displayWidth(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }
  std::vector<std::vector<std::string>> rows_;
};

// key create --account: a further key of an account (the developer center's
// "new key"), so that clients can move to it before the old one is revoked.
int keyCreateForAccount(Store& store, const EqctlOptions& opts, const Args& a, std::ostream& out,
                        std::ostream& err) {
  for (const auto& [k, v] : a.options) {
    if (k == "account" || k == "name" || k == "json") continue;
    err << "eqctl: --" << k << " belongs to the account, which --account names already: "
        << "set it with key set or quota set\n";
    return kExitUsage;
  }
  if (!a.positional.empty()) {
    err << "eqctl: key create takes no positional arguments\n";
    return kExitUsage;
  }
  const std::string& account = a.options.at("account");
  auto name = a.options.find("name");
  if (name == a.options.end() || name->second.empty()) {
    err << "eqctl: key create needs --name\n";
    return kExitUsage;
  }
  Result<CreatedKey> k = store.createAccountKey(account, name->second, opts.env, nowMs());
  if (!k.isOk()) return fail(k.status(), err);
  const CreatedKey& c = k.value();
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "key_id", c.key_id);
    putString(w, "api_key", c.api_key);
    putString(w, "account_id", c.account_id);
    putString(w, "tier", c.tier);
    w.EndObject();
    out << sb.GetString() << "\n";
  } else {
    out << "key_id:     " << c.key_id << "\n"
        << "api_key:    " << c.api_key << "\n"
        << "account_id: " << c.account_id << "\n"
        << "tier:       " << c.tier << "\n"
        << "Store the api_key now: it is shown only once. The account's quota, rate limit and "
        << "webhook secret are this key's too (eqctl webhook-secret show " << c.account_id
        << ").\n";
  }
  return kExitOk;
}

int keyCreate(Store& store, const EqctlOptions& opts, const Args& a, std::ostream& out,
              std::ostream& err) {
  if (a.has("account")) return keyCreateForAccount(store, opts, a, out, err);
  if (!checkKnown(a,
                  {"name", "tier", "quota-fast", "quota-standard", "quota-perfect", "expire-days",
                   "rate", "webhook-url"},
                  err)) {
    return 2;
  }
  if (!a.positional.empty()) {
    err << "eqctl: key create takes no positional arguments (did you mean --name?)\n";
    return kExitUsage;
  }
  std::optional<std::string> webhook_url;
  if (auto url = a.options.find("webhook-url"); url != a.options.end()) {
    if (Status s = net::checkWebhookUrl(url->second, opts.webhook_allow); !s.isOk()) {
      err << "eqctl: --webhook-url: " << s.msg() << "\n";
      return kExitUsage;
    }
    webhook_url = url->second;
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
  // Two statements, not one transaction: createKey is shared with eq-api's
  // demo key path. The key must be printed even if this second write fails,
  // since it can never be shown again; the operator is told to retry the URL.
  int rc = kExitOk;
  if (webhook_url) {
    KeyUpdate u;
    u.default_webhook_url = *webhook_url;
    if (Status s = store.updateKey(c.key_id, u); !s.isOk()) {
      err << "eqctl: the key was created but its default webhook URL was not set (" << s.msg()
          << "); run eqctl key set " << c.key_id << " --webhook-url URL\n";
      rc = kExitError;
    }
  }
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
  return rc;
}

int keyList(Store& store, const Args& a, std::ostream& out, std::ostream& err) {
  if (!checkKnown(a, {}, err)) return kExitUsage;
  if (!a.positional.empty()) {
    err << "eqctl: key list takes no positional arguments\n";
    return kExitUsage;
  }
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
  Table t({"KEY_ID", "PREFIX", "ENV", "STATUS", "EXPIRES", "TIER", "NAME"});
  for (const KeyInfo& k : keys.value()) {
    t.add({k.key_id, k.display_prefix + "...", k.env, keyStatusAt(k, now),
           k.expires_at == 0 ? "-" : iso8601Offset(k.expires_at), k.tier, k.name});
  }
  t.print(out);
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
      << "name:                " << utf8::escapeDisplayControls(k.key.name) << "\n"
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
  if (!checkKnown(a, {"expire-days", "expire-at", "no-expiry", "overlap"}, err)) return 2;
  std::optional<int64_t> expires;
  if (!expiryOption(a, true, &expires, err)) return 2;
  int64_t now = nowMs();
  std::optional<int64_t> old_until;
  if (auto o = a.options.find("overlap"); o != a.options.end()) {
    std::optional<int64_t> overlap = parseDurationMs(o->second);
    if (!overlap || *overlap <= 0 || *overlap > kMaxOverlapMs) {
      err << "eqctl: --overlap must be a duration such as 24h, 90m or 7d, at most 30d\n";
      return kExitUsage;
    }
    old_until = now + *overlap;
  }
  Result<CreatedKey> k = store.rotateKey(key_id, expires, now, old_until);
  if (!k.isOk()) return fail(k.status(), err);
  const CreatedKey& c = k.value();
  // With an overlap, the old key's expiry as it now is (never later than it
  // was before the rotation).
  int64_t old_expires = 0;
  if (old_until) {
    Result<KeyDetails> d = store.keyDetails(key_id);
    old_expires = d.isOk() ? d.value().key.expires_at : *old_until;
  }
  // The webhook secret is the account's and does not change, so it is not
  // printed again: it was shown once, when the account's first key was made.
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "key_id", c.key_id);
    putString(w, "api_key", c.api_key);
    putString(w, "tier", c.tier);
    putString(w, "old_key_id", key_id);
    putOptTime(w, "old_key_expires_at", old_until ? old_expires : 0);
    w.EndObject();
    out << sb.GetString() << "\n";
  } else {
    out << "key_id:  " << c.key_id << "\n"
        << "api_key: " << c.api_key << "\n"
        << "tier:    " << c.tier << "\n";
    if (old_until) {
      out << key_id << " keeps working until " << iso8601Offset(old_expires)
          << "; give clients the new key before then.";
    } else {
      out << "Revoked " << key_id << ".";
    }
    out << " Store the api_key now: it is shown only once. Quota, tasks, rate limit and the "
        << "webhook secret are unchanged.\n";
  }
  // A carried-over expiry in the past would hand out a key that is already
  // refused; say so rather than leave the operator puzzled by 401s.
  Result<KeyDetails> d = store.keyDetails(c.key_id);
  if (d.isOk() && d.value().key.expires_at != 0 && d.value().key.expires_at <= now) {
    err << "eqctl: warning: the new key inherited an expiry in the past ("
        << iso8601Offset(d.value().key.expires_at) << "); extend it with eqctl key set " << c.key_id
        << " --expire-days N\n";
  }
  return 0;
}

int keySet(Store& store, const EqctlOptions& opts, const std::string& key_id, const Args& a,
           std::ostream& out, std::ostream& err) {
  if (!checkKnown(a,
                  {"rate", "tier", "webhook-url", "no-webhook-url", "expire-days", "expire-at",
                   "no-expiry"},
                  err)) {
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
    err << "eqctl: key set needs at least one setting to change\n";
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
  const int64_t now = nowMs();
  const std::string resets = iso8601Offset(nextMonthStartMs(now));
  if (a.json) {
    rapidjson::StringBuffer buf;
    json::Writer w(buf);
    w.StartObject();
    w.Key("quota");
    w.StartObject();
    for (Mode m : {Mode::kFast, Mode::kStandard, Mode::kPerfect}) {
      w.Key(modeName(m));
      w.Int64(v.remaining.of(m));
    }
    w.EndObject();
    json::putString(w, "expire_at", iso8601Offset(v.expire_at_ms));
    json::putString(w, "tier", v.tier);
    json::putMonthly(w, v.monthly_limit, v.usedInMonthOf(now), resets);
    w.EndObject();
    out << buf.GetString() << "\n";
  } else {
    out << "fast:      " << v.remaining.fast << "\n"
        << "standard:  " << v.remaining.standard << "\n"
        << "perfect:   " << v.remaining.perfect << "\n"
        << "expire_at: " << iso8601Offset(v.expire_at_ms)
        << (v.expire_at_ms <= now ? " (expired)" : "") << "\n"
        << "tier:      " << v.tier << "\n"
        << "monthly:   " << v.usedInMonthOf(now) << " of "
        << (v.monthly_limit > 0 ? std::to_string(v.monthly_limit) : "no limit")
        << " used this month (resets " << resets << ")\n";
  }
  return 0;
}

int quotaSet(Store& store, const std::string& account, const Args& a, std::ostream& out,
             std::ostream& err) {
  if (!checkKnown(a, {"fast", "standard", "perfect", "monthly", "expire-days", "expire-at", "tier"},
                  err)) {
    return 2;
  }
  QuotaChange u;
  for (auto [name, slot] :
       {std::pair{"fast", &u.fast}, std::pair{"standard", &u.standard},
        std::pair{"perfect", &u.perfect}, std::pair{"monthly", &u.monthly_limit}}) {
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
    err << "eqctl: quota grant needs --fast, --standard, --perfect or an expiry\n";
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
  putString(w, "status", deliveryStatusName(d.status));
  w.Key("attempts");
  w.Int(d.attempts);
  putOptString(w, "last_attempt_at", d.last_attempt_at == 0 ? "" : iso8601(d.last_attempt_at));
  w.Key("last_status");
  if (d.last_status > 0)
    w.Int(d.last_status);
  else
    w.Null();
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
    err << "eqctl: delivery list takes no positional arguments\n";
    return 2;
  }
  DeliveryFilter f;
  if (a.has("failed") && a.has("status")) {
    err << "eqctl: give --failed or --status, not both\n";
    return 2;
  }
  if (a.has("failed")) f.status = DeliveryStatus::kFailed;
  if (auto st = a.options.find("status"); st != a.options.end()) {
    f.status = parseDeliveryStatus(st->second);
    if (!f.status) {
      err << "eqctl: --status must be pending, delivered or failed\n";
      return 2;
    }
  }
  if (auto t = a.options.find("task"); t != a.options.end()) f.task_id = t->second;
  int64_t limit = f.limit;
  if (!intOption(a, "limit", 1, kMaxListLimit, &limit, err)) return 2;
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
  Table t({"DELIVERY_ID", "TASK_ID", "STATUS", "ATTEMPTS", "LAST", "LAST_ATTEMPT_AT",
           "NEXT_ATTEMPT_AT", "URL"});
  for (const DeliveryRecord& d : list.value()) {
    t.add({d.delivery_id, d.task_id, deliveryStatusName(d.status), std::to_string(d.attempts),
           d.last_status > 0 ? std::to_string(d.last_status) : "-", timeOrDash(d.last_attempt_at),
           timeOrDash(d.next_attempt_at), d.url});
  }
  t.print(out);
  return 0;
}

int deliveryShow(Store& store, const std::string& id, const Args& a, std::ostream& out,
                 std::ostream& err) {
  if (!checkKnown(a, {}, err)) return 2;
  Result<std::optional<DeliveryRecord>> d = store.delivery(id);
  if (!d.isOk()) return fail(d.status(), err);
  if (!d.value()) return fail(Status(404, "no delivery with id " + id), err);
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
      if (at.http_status > 0)
        w.Int(at.http_status);
      else
        w.Null();
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
  Table t({"ATTEMPT", "AT", "STATUS", "LATENCY_MS", "ERROR"});
  for (const DeliveryAttempt& at : attempts.value()) {
    t.add({std::to_string(at.number), iso8601(at.at),
           at.http_status > 0 ? std::to_string(at.http_status) : "-", std::to_string(at.latency_ms),
           orDash(at.error)});
  }
  t.print(out);
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
        << "the dispatcher sends it as attempt " << r.attempts + 1
        << " with the same delivery id\n";
  }
  return 0;
}

// ---------------------------------------------------------------- tasks

bool validMode(const std::string& m) { return isModeName(m); }

// b - a in ms, or -1 when either time is missing. Negative spans (the worker's
// clock behind eq-api's) count as 0 rather than as nonsense.
int64_t span(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return -1;
  return std::max<int64_t>(0, b - a);
}

void putSpan(Writer& w, const char* k, int64_t ms) {
  w.Key(k);
  if (ms < 0)
    w.Null();
  else
    w.Int64(ms);
}

std::string spanText(int64_t ms) { return ms < 0 ? "-" : std::to_string(ms); }

void putTaskError(Writer& w, const TaskRecord& t) {
  w.Key("error");
  if (t.status != TaskStatus::kFailed) {
    w.Null();
    return;
  }
  w.StartObject();
  w.Key("code");
  w.Int(t.error_code);
  putString(w, "msg", t.error_msg);
  w.EndObject();
}

int taskShow(Store& store, const std::string& id, const Args& a, std::ostream& out,
             std::ostream& err) {
  if (!checkKnown(a, {}, err)) return kExitUsage;
  Result<std::optional<TaskRecord>> t = store.task(id);
  if (!t.isOk()) return fail(t.status(), err);
  if (!t.value()) return fail(Status(404, "no task with id " + id), err);
  const TaskRecord& task = *t.value();
  Result<std::optional<DeliveryRecord>> d = store.deliveryForTask(id);
  if (!d.isOk()) return fail(d.status(), err);
  // deliveryForTask does not read the last error; the full record does.
  std::optional<DeliveryRecord> delivery;
  if (d.value()) {
    Result<std::optional<DeliveryRecord>> full = store.delivery(d.value()->delivery_id);
    if (!full.isOk()) return fail(full.status(), err);
    delivery = full.value();
  }
  int64_t queue_ms = span(task.created_at, task.started_at);
  int64_t run_ms = span(task.started_at, task.finished_at);
  int64_t total_ms = span(task.created_at, task.finished_at);
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "task_id", task.task_id);
    putString(w, "account_id", task.account_id);
    putString(w, "key_id", task.key_id);
    putString(w, "request_id", task.request_id);
    putString(w, "mode", task.mode);
    putString(w, "status", taskStatusName(task.status));
    putString(w, "created_at", iso8601(task.created_at));
    putOptString(w, "started_at", task.started_at == 0 ? "" : iso8601(task.started_at));
    putOptString(w, "finished_at", task.finished_at == 0 ? "" : iso8601(task.finished_at));
    putSpan(w, "queue_ms", queue_ms);
    putSpan(w, "run_ms", run_ms);
    putSpan(w, "total_ms", total_ms);
    w.Key("result");
    rapidjson::Document result;
    if (task.status == TaskStatus::kSucceeded &&
        json::parse(task.result_json, &result, defaults::kMaxJsonDepth).isOk()) {
      result.Accept(w);
    } else {
      w.Null();
    }
    putTaskError(w, task);
    putOptString(w, "webhook_url", task.webhook_url);
    w.Key("delivery");
    if (delivery) {
      w.StartObject();
      putDelivery(w, *delivery);
      w.EndObject();
    } else {
      w.Null();
    }
    w.EndObject();
    out << sb.GetString() << "\n";
    return kExitOk;
  }
  out << "task_id:     " << task.task_id << "\n"
      << "status:      " << taskStatusName(task.status) << "\n"
      << "mode:        " << task.mode << "\n"
      << "key_id:      " << task.key_id << "\n"
      << "account_id:  " << task.account_id << "\n"
      << "request_id:  " << task.request_id << "\n"
      << "created_at:  " << iso8601(task.created_at) << "\n"
      << "started_at:  " << timeOrDash(task.started_at) << "\n"
      << "finished_at: " << timeOrDash(task.finished_at) << "\n"
      << "latency_ms:  queue " << spanText(queue_ms) << ", run " << spanText(run_ms) << ", total "
      << spanText(total_ms) << "\n"
      << "webhook_url: " << orDash(task.webhook_url) << "\n";
  if (delivery) {
    out << "delivery:    " << delivery->delivery_id << " " << delivery->status << ", "
        << delivery->attempts << " attempt(s)";
    if (delivery->last_status > 0) out << ", last HTTP " << delivery->last_status;
    if (!delivery->last_error.empty()) out << ", last error: " << delivery->last_error;
    out << " (eqctl delivery show " << delivery->delivery_id << ")\n";
  } else {
    out << "delivery:    -\n";
  }
  if (task.status == TaskStatus::kFailed) {
    out << "error:       " << task.error_code << " " << task.error_msg << "\n";
  }
  rapidjson::Document result;
  if (task.status == TaskStatus::kSucceeded &&
      json::parse(task.result_json, &result, defaults::kMaxJsonDepth).isOk() && result.IsObject()) {
    if (result.HasMember("tokens_used") && result["tokens_used"].IsInt64()) {
      out << "tokens_used: " << result["tokens_used"].GetInt64() << "\n";
    }
    if (result.HasMember("replies") && result["replies"].IsArray()) {
      out << "replies:\n";
      int n = 0;
      for (const auto& r : result["replies"].GetArray()) {
        if (!r.IsObject() || !r.HasMember("text") || !r["text"].IsString()) continue;
        char score[32] = "-";
        if (r.HasMember("score") && r["score"].IsNumber()) {
          std::snprintf(score, sizeof score, "%.2f", r["score"].GetDouble());
        }
        out << "  " << ++n << ". [" << score << "] " << r["text"].GetString() << "\n";
      }
    }
  }
  return kExitOk;
}

int taskList(Store& store, const Args& a, std::ostream& out, std::ostream& err) {
  if (!checkKnown(a, {"key", "status", "mode", "limit"}, err)) return kExitUsage;
  if (!a.positional.empty()) {
    err << "eqctl: task list takes no positional arguments (filter with --key KEY_ID)\n";
    return kExitUsage;
  }
  TaskFilter f;
  if (auto st = a.options.find("status"); st != a.options.end()) {
    f.status = parseTaskStatus(st->second);
    if (!f.status) {
      err << "eqctl: --status must be queued, running, succeeded or failed\n";
      return kExitUsage;
    }
  }
  if (auto m = a.options.find("mode"); m != a.options.end()) {
    if (!validMode(m->second)) {
      err << "eqctl: --mode must be fast, standard or perfect\n";
      return kExitUsage;
    }
    f.mode = m->second;
  }
  int64_t limit = f.limit;
  if (!intOption(a, "limit", 1, kMaxListLimit, &limit, err)) return kExitUsage;
  f.limit = static_cast<int>(limit);
  if (auto k = a.options.find("key"); k != a.options.end()) {
    Result<std::string> account = store.accountOfKey(k->second);
    if (!account.isOk()) return fail(account.status(), err);
    f.account_id = account.value();
  }
  Result<std::vector<TaskRecord>> list = Reports(store).listTasks(f);
  if (!list.isOk()) return fail(list.status(), err);
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartArray();
    for (const TaskRecord& t : list.value()) {
      w.StartObject();
      putString(w, "task_id", t.task_id);
      putString(w, "key_id", t.key_id);
      putString(w, "mode", t.mode);
      putString(w, "status", taskStatusName(t.status));
      putString(w, "created_at", iso8601(t.created_at));
      putOptString(w, "finished_at", t.finished_at == 0 ? "" : iso8601(t.finished_at));
      putSpan(w, "total_ms", span(t.created_at, t.finished_at));
      putTaskError(w, t);
      putOptString(w, "webhook_url", t.webhook_url);
      w.EndObject();
    }
    w.EndArray();
    out << sb.GetString() << "\n";
    return kExitOk;
  }
  Table table({"TASK_ID", "MODE", "STATUS", "CREATED_AT", "TOTAL_MS", "KEY_ID", "ERROR"});
  for (const TaskRecord& t : list.value()) {
    table.add(
        {t.task_id, t.mode, taskStatusName(t.status), iso8601(t.created_at),
         spanText(span(t.created_at, t.finished_at)), t.key_id,
         t.status == TaskStatus::kFailed ? std::to_string(t.error_code) + " " + t.error_msg : "-"});
  }
  table.print(out);
  return kExitOk;
}

// ---------------------------------------------------------------- stats

struct Percentiles {
  int64_t p50 = 0, p95 = 0, max = 0;
  size_t n = 0;
};

// Nearest-rank percentiles: each one is a latency some task really had,
// which is easier to reason about than an interpolated value.
Percentiles percentiles(std::vector<int64_t> v) {
  Percentiles p;
  p.n = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto rank = [&v](double q) {
    size_t r = static_cast<size_t>(q * static_cast<double>(v.size()) + 0.999999);
    return v[std::clamp<size_t>(r, 1, v.size()) - 1];
  };
  p.p50 = rank(0.50);
  p.p95 = rank(0.95);
  p.max = v.back();
  return p;
}

void putPercentiles(Writer& w, const char* k, const Percentiles& p) {
  w.Key(k);
  if (p.n == 0) {
    w.Null();
    return;
  }
  w.StartObject();
  w.Key("p50");
  w.Int64(p.p50);
  w.Key("p95");
  w.Int64(p.p95);
  w.Key("max");
  w.Int64(p.max);
  w.Key("samples");
  w.Uint64(p.n);
  w.EndObject();
}

struct ModeStats {
  std::map<std::string, int64_t> by_status;  // every status, zeros included
  int64_t tasks = 0;
  Percentiles total, queue, run;
};

int stats(Store& store, const Args& a, std::ostream& out, std::ostream& err) {
  if (!checkKnown(a, {"minutes"}, err)) return kExitUsage;
  if (!a.positional.empty()) {
    err << "eqctl: stats takes no positional arguments\n";
    return kExitUsage;
  }
  int64_t minutes = kStatsDefaultMinutes;
  if (!intOption(a, "minutes", 1, kStatsMaxMinutes, &minutes, err)) return kExitUsage;
  int64_t to = nowMs();
  int64_t from = to - minutes * 60'000;
  Result<std::vector<TaskTiming>> timings = Reports(store).taskTimingsSince(from);
  if (!timings.isOk()) return fail(timings.status(), err);
  Result<std::map<std::string, int64_t>> deliveries = Reports(store).deliveryCountsSince(from);
  if (!deliveries.isOk()) return fail(deliveries.status(), err);

  const char* kModes[] = {"fast", "standard", "perfect"};
  const char* kStatuses[] = {"queued", "running", "succeeded", "failed"};
  std::map<std::string, ModeStats> modes;
  std::map<std::string, std::vector<int64_t>> total, queue, run;
  for (const char* m : kModes) {
    for (const char* st : kStatuses) modes[m].by_status[st] = 0;
  }
  for (const TaskTiming& t : timings.value()) {
    ModeStats& m = modes[t.mode];
    ++m.tasks;
    ++m.by_status[t.status];
    if (int64_t q = span(t.created_at, t.started_at); q >= 0) queue[t.mode].push_back(q);
    if (t.status != "succeeded") continue;
    if (int64_t r = span(t.started_at, t.finished_at); r >= 0) run[t.mode].push_back(r);
    if (int64_t s = span(t.created_at, t.finished_at); s >= 0) total[t.mode].push_back(s);
  }
  for (auto& [mode, m] : modes) {
    m.total = percentiles(total[mode]);
    m.queue = percentiles(queue[mode]);
    m.run = percentiles(run[mode]);
  }
  auto deliveryCount = [&](const char* st) {
    auto it = deliveries.value().find(st);
    return it == deliveries.value().end() ? int64_t{0} : it->second;
  };
  constexpr const char* kSource =
      "async tasks in the tasks table; total = finished_at - created_at of succeeded tasks, "
      "queue = started_at - created_at, run = finished_at - started_at; sync calls are not "
      "stored (see eq-api GET /metrics, eq_api_reply_duration_seconds)";

  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("window");
    w.StartObject();
    putString(w, "from", iso8601(from));
    putString(w, "to", iso8601(to));
    w.Key("minutes");
    w.Int64(minutes);
    w.EndObject();
    putString(w, "latency_source", kSource);
    w.Key("modes");
    w.StartObject();
    for (const char* mode : kModes) {
      const ModeStats& m = modes[mode];
      w.Key(mode);
      w.StartObject();
      w.Key("tasks");
      w.Int64(m.tasks);
      for (const auto& [st, n] : m.by_status) {
        w.Key(st.c_str());
        w.Int64(n);
      }
      putPercentiles(w, "total_ms", m.total);
      putPercentiles(w, "queue_ms", m.queue);
      putPercentiles(w, "run_ms", m.run);
      w.EndObject();
    }
    w.EndObject();
    w.Key("deliveries");
    w.StartObject();
    for (const char* st : {"pending", "delivered", "failed"}) {
      w.Key(st);
      w.Int64(deliveryCount(st));
    }
    w.EndObject();
    w.EndObject();
    out << sb.GetString() << "\n";
    return kExitOk;
  }
  auto ms = [](const Percentiles& p, int64_t Percentiles::*field) {
    return p.n == 0 ? std::string("-") : std::to_string(p.*field);
  };
  out << "Async tasks created from " << iso8601(from) << " to " << iso8601(to) << " (last "
      << minutes << " min). Latencies in ms, of succeeded tasks.\n";
  Table t({"MODE", "TASKS", "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "TOTAL_P50", "TOTAL_P95",
           "TOTAL_MAX", "QUEUE_P50", "QUEUE_P95", "RUN_P50", "RUN_P95"});
  for (const char* mode : kModes) {
    const ModeStats& m = modes[mode];
    t.add({mode, std::to_string(m.tasks), std::to_string(m.by_status.at("queued")),
           std::to_string(m.by_status.at("running")), std::to_string(m.by_status.at("succeeded")),
           std::to_string(m.by_status.at("failed")), ms(m.total, &Percentiles::p50),
           ms(m.total, &Percentiles::p95), ms(m.total, &Percentiles::max),
           ms(m.queue, &Percentiles::p50), ms(m.queue, &Percentiles::p95),
           ms(m.run, &Percentiles::p50), ms(m.run, &Percentiles::p95)});
  }
  t.print(out);
  out << "Webhook deliveries created in the window: pending " << deliveryCount("pending")
      << ", delivered " << deliveryCount("delivered") << ", failed " << deliveryCount("failed")
      << "\n"
      << "Source: " << kSource << ".\n";
  return kExitOk;
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

namespace {

// ---------------------------------------------------------------- accounts

std::string portalLinkUrl(const EqctlOptions& opts, const std::string& kind,
                          const std::string& token) {
  std::string base = opts.portal_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  // The token travels in the fragment: browsers never send it to a server,
  // so it stays out of access logs and Referer headers.
  return base + "/portal/#/" + (kind == "invite" ? "welcome" : "reset") + "/" + token;
}

int accountLink(Store& store, const EqctlOptions& opts, const std::string& kind,
                const std::string& email, const Args& a, std::ostream& out, std::ostream& err) {
  if (!checkKnown(a,
                  kind == "invite" ? std::initializer_list<const char*>{"tier", "key"}
                                   : std::initializer_list<const char*>{},
                  err)) {
    return kExitUsage;
  }
  if (email.find('@') == std::string::npos) {
    err << "eqctl: EMAIL must be an email address\n";
    return kExitUsage;
  }
  std::string tier = "free";
  if (auto t = a.options.find("tier"); t != a.options.end()) tier = t->second;
  if (!validTier(tier)) {
    err << "eqctl: --tier must be free, pro or ultra\n";
    return kExitUsage;
  }
  if (kind == "invite" && opts.portal_signup == "off") {
    // Checked after the usage errors, which say more about the call itself.
    err << "eqctl: sign-up is closed (EQ_PORTAL_SIGNUP=off): no new person can be invited; "
           "existing people sign in, and `eqctl account reset-password EMAIL` still works\n";
    return kExitRefused;
  }
  std::string account;
  if (auto k = a.options.find("key"); k != a.options.end()) {
    Result<std::string> acc = store.accountOfKey(k->second);
    if (!acc.isOk()) return fail(acc.status(), err);
    account = acc.value();
  }
  int64_t now = nowMs();
  Result<std::string> token = store.createPortalLink(kind, email, tier, account, now);
  if (!token.isOk()) return fail(token.status(), err);
  std::string link = portalLinkUrl(opts, kind, token.value());
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "email", email);
    putString(w, "link", link);
    putOptTime(w, "expires_at", now + Store::kLinkTtlMs);
    w.EndObject();
    out << sb.GetString() << "\n";
    return kExitOk;
  }
  out << (kind == "invite" ? "Sign-up link for " : "Password reset link for ") << email
      << " (one use, valid 72 h):\n"
      << link << "\n";
  return kExitOk;
}

int accountList(Store& store, const Args& a, std::ostream& out, std::ostream& err) {
  if (!checkKnown(a, {}, err)) return kExitUsage;
  Result<std::vector<Person>> people = store.listPeople();
  if (!people.isOk()) return fail(people.status(), err);
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartArray();
    for (const Person& p : people.value()) {
      w.StartObject();
      putString(w, "email", p.email);
      putString(w, "account_id", p.account_id);
      putString(w, "status", p.status);
      putOptTime(w, "created_at", p.created_at);
      w.EndObject();
    }
    w.EndArray();
    out << sb.GetString() << "\n";
    return kExitOk;
  }
  Table t({"EMAIL", "ACCOUNT_ID", "STATUS", "CREATED"});
  for (const Person& p : people.value()) {
    t.add({p.email, p.account_id, p.status, iso8601Offset(p.created_at)});
  }
  t.print(out);
  return kExitOk;
}

int accountShow(Store& store, const std::string& email, const Args& a, std::ostream& out,
                std::ostream& err) {
  if (!checkKnown(a, {}, err)) return kExitUsage;
  Result<std::optional<Person>> p = store.personByEmail(email);
  if (!p.isOk()) return fail(p.status(), err);
  if (!p.value()) return fail(Status(404, "no person with email " + email), err);
  const Person& person = *p.value();
  Result<AccountQuota> q = store.quota(person.account_id);
  if (!q.isOk()) return fail(q.status(), err);
  Result<std::vector<AccountKey>> keys = store.accountKeys(person.account_id, nowMs());
  if (!keys.isOk()) return fail(keys.status(), err);
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "email", person.email);
    putString(w, "account_id", person.account_id);
    putString(w, "status", person.status);
    putString(w, "tier", q.value().tier);
    w.Key("quota");
    w.StartObject();
    w.Key("fast");
    w.Int64(q.value().remaining.fast);
    w.Key("standard");
    w.Int64(q.value().remaining.standard);
    w.Key("perfect");
    w.Int64(q.value().remaining.perfect);
    w.EndObject();
    putOptTime(w, "expire_at", q.value().expire_at_ms);
    w.Key("keys");
    w.StartArray();
    for (const AccountKey& k : keys.value()) {
      w.StartObject();
      putString(w, "key_id", k.key_id);
      putString(w, "name", k.name);
      putString(w, "prefix", k.display_prefix);
      putString(w, "status", k.status);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    out << sb.GetString() << "\n";
    return kExitOk;
  }
  out << "email:      " << utf8::escapeDisplayControls(person.email) << "\n"
      << "account_id: " << person.account_id << "\n"
      << "status:     " << person.status << "\n"
      << "tier:       " << q.value().tier << "\n"
      << "quota:      fast " << q.value().remaining.fast << ", standard "
      << q.value().remaining.standard << ", perfect " << q.value().remaining.perfect
      << " (expire_at " << iso8601Offset(q.value().expire_at_ms) << ")\n";
  Table t({"KEY_ID", "PREFIX", "STATUS", "NAME"});
  for (const AccountKey& k : keys.value()) t.add({k.key_id, k.display_prefix, k.status, k.name});
  t.print(out);
  return kExitOk;
}

// backup PATH: the SQLite database copied into a new file.
int backup(Store& store, const Args& a, std::ostream& out, std::ostream& err) {
  if (!checkKnown(a, {"force"}, err)) return kExitUsage;
  if (a.positional.size() != 1 || a.positional[0].empty()) {
    err << "eqctl: backup needs one PATH, the new file\n";
    return kExitUsage;
  }
  const std::string& path = a.positional[0];
  if (Status s = store.backupTo(path, a.has("force")); !s.isOk()) return fail(s, err);
  struct stat st {};
  const long long bytes = ::stat(path.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : 0;
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    putString(w, "path", path);
    w.Key("bytes");
    w.Int64(bytes);
    w.EndObject();
    out << sb.GetString() << "\n";
  } else {
    out << "backed up to " << path << " (" << bytes << " bytes)\n";
  }
  return kExitOk;
}

// webhook-secret show|rotate: the account's signing secrets. `id` is an
// account id or one of its keys' ids.
int webhookSecret(Store& store, const std::string& verb, const std::string& id, const Args& a,
                  std::ostream& out, std::ostream& err) {
  if (!checkKnown(a, {}, err)) return kExitUsage;
  Result<std::string> account =
      ids::looksLike(id, "acc_") ? Result<std::string>(id) : store.accountOfKey(id);
  if (!account.isOk()) return fail(account.status(), err);
  const int64_t now = nowMs();
  if (verb == "rotate") {
    Result<std::string> secret = store.rotateWebhookSecret(account.value(), now);
    if (!secret.isOk()) return fail(secret.status(), err);
    const int64_t until = now + Store::kSecretOverlapMs;
    if (a.json) {
      rapidjson::StringBuffer sb;
      Writer w(sb);
      w.StartObject();
      putString(w, "account_id", account.value());
      putString(w, "secret", secret.value());
      putOptTime(w, "previous_until", until);
      w.EndObject();
      out << sb.GetString() << "\n";
    } else {
      out << "secret: " << secret.value() << "\n"
          << "Until " << iso8601Offset(until) << " webhook-signature carries a signature with "
          << "the previous secret too; X-Service-Signature uses this one from now on. Give "
          << "receivers the new secret before then.\n";
    }
    return kExitOk;
  }
  Result<WebhookSettings> w = store.webhookSettings(account.value(), now);
  if (!w.isOk()) return fail(w.status(), err);
  const WebhookSettings& ws = w.value();
  if (a.json) {
    rapidjson::StringBuffer sb;
    Writer j(sb);
    j.StartObject();
    putString(j, "account_id", account.value());
    putString(j, "secret", ws.secret);
    putOptString(j, "previous_secret", ws.previous_secret);
    putOptTime(j, "previous_until", ws.previous_until);
    j.EndObject();
    out << sb.GetString() << "\n";
    return kExitOk;
  }
  out << "account_id: " << account.value() << "\n"
      << "secret:     " << ws.secret << "\n";
  if (!ws.previous_secret.empty()) {
    out << "previous:   " << ws.previous_secret << " (in webhook-signature beside it until "
        << iso8601Offset(ws.previous_until) << ")\n";
  }
  return kExitOk;
}

// Runs the command; errors go to err as text lines "eqctl: ...".
// ---------------------------------------------------------------- the command table

// What a command's handler gets: the store, the settings, its arguments
// and, when the table names one, its one positional argument.
struct Invocation {
  Store& store;
  const EqctlOptions& opts;
  const Args& a;
  const std::string& operand;
  std::ostream& out;
  std::ostream& err;
};
using Handler = int (*)(const Invocation&);

int runStats(const Invocation& i) { return stats(i.store, i.a, i.out, i.err); }
int runBackup(const Invocation& i) { return backup(i.store, i.a, i.out, i.err); }
int runKeyCreate(const Invocation& i) { return keyCreate(i.store, i.opts, i.a, i.out, i.err); }
int runKeyList(const Invocation& i) { return keyList(i.store, i.a, i.out, i.err); }
int runKeyShow(const Invocation& i) {
  // Checked here, not in keyShow: key set and revoke print through it with
  // their own options.
  if (!checkKnown(i.a, {}, i.err)) return kExitUsage;
  return keyShow(i.store, i.operand, i.a, i.out, i.err);
}
int runKeyRotate(const Invocation& i) { return keyRotate(i.store, i.operand, i.a, i.out, i.err); }
int runKeySet(const Invocation& i) { return keySet(i.store, i.opts, i.operand, i.a, i.out, i.err); }
int runKeyRevoke(const Invocation& i) {
  if (!checkKnown(i.a, {}, i.err)) return kExitUsage;
  if (Status s = i.store.revokeKey(i.operand); !s.isOk()) return fail(s, i.err);
  if (i.a.json) return keyShow(i.store, i.operand, i.a, i.out, i.err);
  i.out << "revoked " << i.operand << "\n";
  return kExitOk;
}
int runWebhookSecretShow(const Invocation& i) {
  return webhookSecret(i.store, "show", i.operand, i.a, i.out, i.err);
}
int runWebhookSecretRotate(const Invocation& i) {
  return webhookSecret(i.store, "rotate", i.operand, i.a, i.out, i.err);
}
// The quota commands take a key id and work on its account.
using QuotaCommand = int (*)(Store&, const std::string& account, const Args&, std::ostream&,
                             std::ostream&);
int onKeysAccount(const Invocation& i, QuotaCommand command) {
  Result<std::string> account = i.store.accountOfKey(i.operand);
  if (!account.isOk()) return fail(account.status(), i.err);
  return command(i.store, account.value(), i.a, i.out, i.err);
}
int runQuotaShow(const Invocation& i) {
  // quota show has no options of its own (set and grant check theirs, after
  // the lookup); a usage error should not hide behind a missing key.
  if (!checkKnown(i.a, {}, i.err)) return kExitUsage;
  return onKeysAccount(i, quotaShow);
}
int runQuotaSet(const Invocation& i) { return onKeysAccount(i, quotaSet); }
int runQuotaGrant(const Invocation& i) { return onKeysAccount(i, quotaGrant); }
int runTaskShow(const Invocation& i) { return taskShow(i.store, i.operand, i.a, i.out, i.err); }
int runTaskList(const Invocation& i) { return taskList(i.store, i.a, i.out, i.err); }
int runDeliveryList(const Invocation& i) { return deliveryList(i.store, i.a, i.out, i.err); }
int runDeliveryShow(const Invocation& i) {
  return deliveryShow(i.store, i.operand, i.a, i.out, i.err);
}
int runDeliveryReplay(const Invocation& i) {
  return deliveryReplay(i.store, i.operand, i.a, i.out, i.err);
}
int runAccountInvite(const Invocation& i) {
  return accountLink(i.store, i.opts, "invite", i.operand, i.a, i.out, i.err);
}
int runAccountResetPassword(const Invocation& i) {
  return accountLink(i.store, i.opts, "reset", i.operand, i.a, i.out, i.err);
}
int runAccountList(const Invocation& i) { return accountList(i.store, i.a, i.out, i.err); }
int runAccountShow(const Invocation& i) {
  return accountShow(i.store, i.operand, i.a, i.out, i.err);
}
int runAccountDisable(const Invocation& i) {
  if (!checkKnown(i.a, {}, i.err)) return kExitUsage;
  if (Status s = i.store.disablePerson(i.operand, nowMs()); !s.isOk()) return fail(s, i.err);
  if (i.a.json) return accountShow(i.store, i.operand, i.a, i.out, i.err);
  i.out << "disabled " << i.operand << ": sessions ended, keys revoked\n";
  return kExitOk;
}

// One entry per command: what runs it, the synopsis for `eqctl --help` and
// the details for `eqctl NOUN VERB --help`. Kept beside each other so they
// cannot drift.
struct Command {
  const char* noun;
  const char* verb;  // "" for the commands that are a noun alone
  // The one positional argument the command takes ("KEY_ID", "EMAIL"...),
  // checked before it runs; nullptr: it reads its arguments itself.
  const char* operand;
  // nullptr: eqctl's main runs it before any store is opened (migrate,
  // store copy).
  Handler run;
  const char* synopsis;
  const char* details;
};

constexpr Command kCommands[] = {
    {"key", "create", nullptr, runKeyCreate,
     "key create --name NAME [--tier free|pro|ultra] [--quota-fast N] [--quota-standard N]\n"
     "           [--quota-perfect N] [--expire-days N] [--rate N] [--webhook-url URL] [--json]\n"
     "   or: eqctl key create --account ACCOUNT_ID --name NAME [--json]",
     "Creates an account and its first key. Prints the key (eq_live_... or eq_test_..., after\n"
     "EQ_ENV) and the account's webhook signing secret (whsec_...) once. The database keeps\n"
     "only a hash and a display prefix of the key, but the webhook secret in clear: signing\n"
     "a webhook needs the secret itself. Defaults: 100 units per mode, quota expiring in 30 days\n"
     "(--expire-days is the quota's), 60 requests/minute, no default webhook URL.\n"
     "--json prints {key_id, api_key, webhook_secret, tier}.\n"
     "With --account, a further key of an existing account (key show prints a key's\n"
     "account_id): its quota, rate limit, tier and webhook settings are the account's, so\n"
     "only --name is taken, and the webhook secret is not printed (webhook-secret show).\n"
     "--json prints {key_id, api_key, account_id, tier}.\n"},
    {"key", "list", nullptr, runKeyList, "key list [--json]",
     "Every key with its display prefix, env, status (active, revoked, expired), expiry, tier\n"
     "and name; never a full key. --json prints an array of {key_id, name, prefix, env, status,\n"
     "tier, created_at, expires_at}.\n"},
    {"key", "show", "KEY_ID", runKeyShow, "key show KEY_ID [--json]",
     "The key (status, expiry, revocation, the key that replaced it) and its account's rate\n"
     "limit, default webhook URL and quota.\n"},
    {"key", "revoke", "KEY_ID", runKeyRevoke, "key revoke KEY_ID [--json]",
     "Stops the key at once: from now on it gets 401. --json prints the key as `key show` does.\n"},
    {"key", "rotate", "KEY_ID", runKeyRotate,
     "key rotate KEY_ID [--overlap DURATION] [--expire-days N | --expire-at ISO8601 |\n"
     "           --no-expiry] [--json]",
     "Issues a new key for the same account. Without --overlap KEY_ID is revoked in the same\n"
     "transaction; with it (such as 24h, 90m or 7d, at most 30d) KEY_ID keeps working until\n"
     "then, its expiry shown by key list and key show, so clients can switch to the new key\n"
     "first. Quota, tasks, rate limit, default webhook URL and the webhook secret belong to\n"
     "the account and stay (the secret is not printed again). The new key keeps the old one's\n"
     "expiry unless an option says otherwise. A key rotated with an overlap cannot be rotated\n"
     "again (rotate the new one, or revoke it). --json prints {key_id, api_key, tier,\n"
     "old_key_id, old_key_expires_at}.\n"},
    {"key", "set", "KEY_ID", runKeySet,
     "key set KEY_ID [--rate N] [--tier T] [--webhook-url URL | --no-webhook-url]\n"
     "           [--expire-days N | --expire-at ISO8601 | --no-expiry] [--json]",
     "Changes the account's rate limit (requests/minute), tier or default webhook URL (an\n"
     "absolute http/https URL; a literal non-public address is refused unless\n"
     "EQ_WEBHOOK_ALLOW_CIDRS allows it), or the key's own expiry (an expired key is refused\n"
     "like a revoked one). Prints the key as `key show` does.\n"},
    {"webhook-secret", "show", "KEY_ID or ACCOUNT_ID", runWebhookSecretShow,
     "webhook-secret show KEY_ID|ACCOUNT_ID [--json]",
     "The account's webhook signing secret, and the previous one while a rotation's overlap\n"
     "runs (each delivery's webhook-signature then carries a signature with both). --json\n"
     "prints {account_id, secret, previous_secret, previous_until}.\n"},
    {"webhook-secret", "rotate", "KEY_ID or ACCOUNT_ID", runWebhookSecretRotate,
     "webhook-secret rotate KEY_ID|ACCOUNT_ID [--json]",
     "A new webhook signing secret for the account. For 24 hours (as in the developer center)\n"
     "the Standard Webhooks header webhook-signature carries a signature with each secret, so\n"
     "receivers that verify it can switch meanwhile; X-Service-Signature uses the new one at\n"
     "once. --json prints {account_id, secret, previous_until}.\n"},
    {"quota", "show", "KEY_ID", runQuotaShow, "quota show KEY_ID [--json]",
     "Remaining units per mode, expire_at, tier and the monthly volume of the key's account.\n"
     "--json prints the same shape as GET /api/v1/quota's data: {quota: {fast, standard,\n"
     "perfect}, expire_at, tier, monthly: {limit, used, resets_at}}.\n"},
    {"quota", "set", "KEY_ID", runQuotaSet,
     "quota set KEY_ID [--fast N] [--standard N] [--perfect N] [--monthly N]\n"
     "           [--expire-days N | --expire-at ISO8601] [--tier T] [--json]",
     "Sets the named modes to N; the others are not written, so a charge landing meanwhile is\n"
     "kept. --monthly N sets the account's monthly volume: N units a calendar month (UTC) over\n"
     "all modes, 0 for no limit (an account under a commercial arrangement); 100000 for a\n"
     "new account. --expire-* moves the quota's expiry (a time in the past ends it now).\n"},
    {"quota", "grant", "KEY_ID", runQuotaGrant,
     "quota grant KEY_ID [--fast N] [--standard N] [--perfect N]\n"
     "           [--expire-days N | --expire-at ISO8601] [--json]",
     "Adds N units to the named modes in one atomic UPDATE, and optionally moves the expiry.\n"
     "Warns on stderr when the quota has expired (the units cannot be used until extended).\n"},
    {"task", "show", "TASK_ID", runTaskShow, "task show TASK_ID [--json]",
     "One async task: status, mode, key, times (created by eq-api, started and finished by the\n"
     "worker), result replies or error, and its webhook delivery. --json prints {task_id,\n"
     "account_id, key_id, request_id, mode, status, created_at, started_at, finished_at,\n"
     "queue_ms, run_ms, total_ms, result, error, webhook_url, delivery}.\n"},
    {"task", "list", nullptr, runTaskList,
     "task list [--key KEY_ID] [--status queued|running|succeeded|failed]\n"
     "           [--mode fast|standard|perfect] [--limit N] [--json]",
     "Async tasks, newest first (default 50, at most 10000). --key lists the tasks of that\n"
     "key's account, including those made with keys it replaced. --json prints an array of\n"
     "{task_id, key_id, mode, status, created_at, finished_at, total_ms, error, webhook_url}.\n"},
    {"delivery", "list", nullptr, runDeliveryList,
     "delivery list [--failed | --status pending|delivered|failed] [--task TASK_ID]\n"
     "           [--limit N] [--json]",
     "Webhook deliveries, newest first (default 100): id, task, status, attempts, last HTTP\n"
     "status and error, last and next attempt time, URL.\n"},
    {"delivery", "show", "DELIVERY_ID", runDeliveryShow, "delivery show DELIVERY_ID [--json]",
     "One delivery with every attempt (number, time, HTTP status, latency, error).\n"},
    {"delivery", "replay", "DELIVERY_ID", runDeliveryReplay, "delivery replay DELIVERY_ID [--json]",
     "A delivered or failed delivery becomes pending, due now: the dispatcher sends it within\n"
     "200 ms with the same delivery id, on a fresh retry schedule; attempts keep counting.\n"
     "A pending delivery is refused (exit 4).\n"},
    {"account", "invite", "EMAIL", runAccountInvite,
     "account invite EMAIL [--tier free|pro|ultra] [--key KEY_ID] [--json]",
     "Prints a one-time sign-up link for the developer center, valid 72 h. The person sets a\n"
     "password through it and gets a new account of the tier (100 units per mode, 30 days),\n"
     "or, with --key, the account of an existing key (made by key create). The link's host\n"
     "is EQ_PORTAL_URL (default http://127.0.0.1:8080). --json prints {email, link, expires_at}.\n"
     "Refused (exit 5) when EQ_PORTAL_SIGNUP=off: sign-up is closed to new people. Refused\n"
     "(exit 4) when EMAIL (or the account of --key) already has a person: send them\n"
     "`account reset-password EMAIL` instead, which sets a password and nothing else.\n"},
    {"account", "list", nullptr, runAccountList, "account list [--json]",
     "Every person of the developer center: email, account, status, created.\n"},
    {"account", "show", "EMAIL", runAccountShow, "account show EMAIL [--json]",
     "The person, their account's quota and tier, and their keys.\n"},
    {"account", "disable", "EMAIL", runAccountDisable, "account disable EMAIL [--json]",
     "Disables the person (their sessions end) and revokes every key of their account.\n"
     "--json prints the person as `account show --json` does, after the change.\n"},
    {"account", "reset-password", "EMAIL", runAccountResetPassword,
     "account reset-password EMAIL [--json]",
     "Prints a one-time link, valid 72 h, that sets a new password and ends every session;\n"
     "it never changes the account, its tier or its keys. Using any link of a person revokes\n"
     "their other links, and so does a password change. Refused (exit 4) for a disabled person.\n"},
    {"migrate", "", nullptr, nullptr, "migrate [--status]",
     "Applies the store's pending schema migrations and says which; with --status lists each\n"
     "migration with the time it was applied, or pending, and changes nothing. The database is\n"
     "EQ_DB_URL (sqlite:PATH or postgresql://...) or else EQ_DB_PATH. eq-api, eq-dispatcher\n"
     "and eqctl also migrate when they open the store; on PostgreSQL an advisory lock makes\n"
     "hosts that start together apply each migration once.\n"},
    {"backup", "", nullptr, runBackup, "backup PATH [--force] [--json]",
     "Copies the SQLite database, as one consistent snapshot, into a new file PATH (mode\n"
     "0600) while the stack runs: SQLite's online backup API, so the copy holds every commit,\n"
     "those still in the -wal file too. Refused when PATH exists, unless --force. The copy is a\n"
     "database eq-api opens as it is (docs/operations.md, \"Backing up\", has the restore).\n"
     "A PostgreSQL store is backed up with pg_dump (the line is in the error). --json prints\n"
     "{path, bytes}.\n"},
    {"store", "copy", nullptr, nullptr,
     "store copy --to postgresql://USER:PASSWORD@HOST/DB [--force]",
     "Copies the whole store of a stopped deployment from SQLite (EQ_DB_URL or EQ_DB_PATH) into\n"
     "a new, empty PostgreSQL database, in one transaction, and checks every table's row count;\n"
     "then point EQ_DB_URL of every process at it. Refused (exit 2) when the destination holds\n"
     "data, or when an eq-api of the source beat within a minute (stop the stack, or --force).\n"},
    {"stats", "", nullptr, runStats, "stats [--minutes N] [--json]",
     "Per mode, the async tasks created in the last N minutes (default 60, at most 10080):\n"
     "counts by status, and p50/p95/max of their latency in ms. Latency comes from the tasks\n"
     "table: total = finished_at - created_at of succeeded tasks (eq-api admission to the\n"
     "worker's result event), queue = started_at - created_at (admission to a worker taking\n"
     "the job), run = finished_at - started_at. created_at is eq-api's clock and the others\n"
     "the worker's, so clock skew between hosts shows up here (negative values count as 0).\n"
     "Sync calls are not stored in the database; their latency is eq-api's GET /metrics\n"
     "(eq_api_reply_duration_seconds). Also counts the webhook deliveries created in the window\n"
     "by status.\n"},
};

constexpr const char* kUsageFooter =
    "Every command takes --json (stable machine-readable output on stdout; on failure one\n"
    "JSON line {\"error\": {\"exit_code\", \"kind\", \"message\"}} on stderr) and --help.\n"
    "Rate limit, tier, default webhook URL and quota belong to the key's account, so they\n"
    "survive a rotation. --expire-at takes UTC times such as 2026-01-31T00:00:00Z (or\n"
    "+08:00 offsets) and may lie in the past (ends a quota or key now).\n"
    "The database is EQ_DB_URL (postgresql://USER:PASSWORD@HOST/DB, or sqlite:PATH), else\n"
    "the SQLite file EQ_DB_PATH, and must exist (only migrate makes one; scripts/eqctl finds\n"
    "the stack scripts/run started with the same EQ_VAR_DIR); keys are minted for EQ_ENV\n"
    "(production: eq_live_, staging: eq_test_). It stores API keys and portal passwords only\n"
    "as hashes, but webhook secrets and message texts in clear (a webhook signature needs\n"
    "its secret), so a SQLite file and its -wal and -shm files are created readable by their\n"
    "owner only (mode 0600).\n"
    "Exit codes: 0 ok, 1 internal error (database), 2 usage error, 3 not found,\n"
    "4 conflict (wrong state), 5 refused by the deployment's settings.\n";

// Commands that are a noun alone: what follows them is arguments.
bool noArgVerb(const std::string& noun) {
  return noun == "stats" || noun == "migrate" || noun == "backup";
}

const Command* findCommand(const std::string& noun, const std::string& verb) {
  for (const Command& c : kCommands) {
    if (noun == c.noun && verb == c.verb) return &c;
  }
  return nullptr;
}

// The overview, or only one noun's commands when `noun` names one.
void printUsage(std::ostream& out, const std::string& noun = "") {
  out << "usage: eqctl COMMAND [ARGS] [--json] [--help]\n";
  for (const Command& c : kCommands) {
    if (noun.empty() || noun == c.noun) out << "  " << c.synopsis << "\n";
  }
  out << kUsageFooter;
}

void printCommandHelp(std::ostream& out, const Command& c) {
  out << "usage: eqctl " << c.synopsis << "\n\n" << c.details << "\n" << kUsageFooter;
}

// Runs a command of the table: its operand checked, then its handler.
int runCommand(const Command& cmd, Store& store, const EqctlOptions& opts, const Args& a,
               std::ostream& out, std::ostream& err) {
  static const std::string kNone;
  if (cmd.operand != nullptr && a.positional.size() != 1) {
    err << "eqctl: " << cmd.noun << " " << cmd.verb << " needs one " << cmd.operand << "\n";
    return kExitUsage;
  }
  const std::string& operand = cmd.operand != nullptr ? a.positional[0] : kNone;
  if (cmd.run == nullptr) {  // never reached: eqctl's main runs these
    err << "eqctl: " << cmd.noun << " is run by eqctl itself\n";
    return kExitError;
  }
  return cmd.run(Invocation{store, opts, a, operand, out, err});
}

const char* exitKind(int rc) {
  switch (rc) {
    case kExitUsage:
      return "usage";
    case kExitNotFound:
      return "not_found";
    case kExitConflict:
      return "conflict";
    case kExitRefused:
      return "refused";
    default:
      return "internal";
  }
}

}  // namespace

namespace {

// db_url read as a store URL (store::DbUrl), or nothing after a line on err
// (exit code kExitUsage).
std::optional<store::DbUrl> readDbUrl(const std::string& db_url, std::ostream& err) {
  auto url = store::DbUrl::parse(db_url);
  if (!url.isOk()) {
    err << "eqctl: EQ_DB_URL: " << url.status().msg() << "\n";
    return std::nullopt;
  }
  return std::move(url).value();
}

// A database as it is, no migration applied, and where its migrations
// stand: what migrate and the check that a database exists both read.
struct DbAsIs {
  std::unique_ptr<store::Db> db;
  std::vector<store::MigrationState> migrations;
};

// Opens url as it is into *out; on failure a line on err and the exit code.
std::optional<int> openAsIs(const store::DbUrl& url, DbAsIs* out, std::ostream& err) {
  auto db = store::Db::open(url);
  if (!db.isOk()) {
    // A URL libpq cannot use or a password refused is the operator's (2);
    // a server that cannot be reached now, the database's (1).
    err << "eqctl: " << url.redacted() << ": " << db.status().msg() << "\n";
    return Store::exitStatusFor(db.status());
  }
  auto states = store::migrationStatus(*db.value());
  if (!states.isOk()) {
    err << "eqctl: " << states.status().msg() << "\n";
    return kExitError;
  }
  out->db = std::move(db).value();
  out->migrations = std::move(states).value();
  return std::nullopt;
}

}  // namespace

int requireExistingStore(const std::string& db_url, std::ostream& err) {
  const std::optional<store::DbUrl> url = readDbUrl(db_url, err);
  if (!url) return kExitUsage;
  const std::string where = url->redacted();
  const auto missing = [&](const std::string& what) {
    err << "eqctl: " << what << "\n"
        << "  eqctl works on the database of a stack and never makes one. Point it at the\n"
        << "  stack's: scripts/eqctl finds it by EQ_VAR_DIR (the folder scripts/run was given;\n"
        << "  ./var unless it was told otherwise); eqctl itself reads EQ_DB_URL (sqlite:PATH or\n"
        << "  postgresql://...), else EQ_DB_PATH. `eqctl migrate` makes a new, empty one there.\n";
    return kExitUsage;
  };
  if (url->engine == store::DbEngine::kSqlite && url->target != ":memory:" &&
      ::access(url->target.c_str(), F_OK) != 0) {
    return missing("no database at " + where);
  }
  DbAsIs found;
  if (std::optional<int> rc = openAsIs(*url, &found, err)) return *rc;
  if (std::none_of(found.migrations.begin(), found.migrations.end(),
                   [](const store::MigrationState& m) { return m.applied_at_ms.has_value(); })) {
    return missing(where + " holds no EQ Reply tables");
  }
  return kExitOk;
}

int runMigrate(const std::string& db_url, const std::vector<std::string>& args, std::ostream& out,
               std::ostream& err) {
  bool status = false;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--status") {
      status = true;
    } else {
      err << "eqctl: migrate: unknown option '" << args[i]
          << "'\nusage: eqctl migrate [--status]\n";
      return kExitUsage;
    }
  }
  const std::optional<store::DbUrl> url = readDbUrl(db_url, err);
  if (!url) return kExitUsage;
  DbAsIs found;
  if (std::optional<int> rc = openAsIs(*url, &found, err)) return *rc;
  const std::vector<store::MigrationState>& before = found.migrations;
  // The version without its folder and .sql: 001_init.
  const auto shortName = [](std::string_view v) {
    v.remove_prefix(v.rfind('/') + 1);
    if (v.ends_with(".sql")) v.remove_suffix(4);
    return std::string(v);
  };
  size_t pending = 0;
  for (const store::MigrationState& m : before) pending += m.applied_at_ms ? 0 : 1;
  if (status) {
    out << "database " << url->redacted() << "\n";
    for (const store::MigrationState& m : before) {
      out << "  " << shortName(m.version) << "  "
          << (m.applied_at_ms ? "applied " + iso8601(*m.applied_at_ms) : std::string("pending"))
          << "\n";
    }
    out << (before.size() - pending) << " of " << before.size() << " applied\n";
    return kExitOk;
  }
  if (Status st = store::migrate(*found.db); !st.isOk()) {
    err << "eqctl: migrate: " << st.msg() << "\n";
    return kExitError;
  }
  if (pending == 0) {
    out << "up to date (" << before.size() << " migrations)\n";
    return kExitOk;
  }
  for (const store::MigrationState& m : before) {
    if (!m.applied_at_ms) out << "applied " << shortName(m.version) << "\n";
  }
  return kExitOk;
}

bool isHelpRequest(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "help") return true;
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& s) { return s == "--help" || s == "-h"; });
}

bool needsStore(const std::vector<std::string>& args) {
  if (args.empty() || isHelpRequest(args)) return false;
  const std::string& noun = args[0];
  const std::string verb = noArgVerb(noun) || args.size() < 2 ? "" : args[1];
  return findCommand(noun, verb) != nullptr;
}

int runEqctl(Store& store, const EqctlOptions& opts, const std::vector<std::string>& args,
             std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    printUsage(err);
    return kExitUsage;
  }
  // `eqctl help key set` reads like `eqctl key set --help`.
  std::vector<std::string> rest = args;
  bool help = isHelpRequest(rest);
  if (rest[0] == "help" || rest[0] == "--help" || rest[0] == "-h") rest.erase(rest.begin());
  const std::string noun = rest.empty() ? "" : rest[0];
  // stats and migrate have no verb; every other command is NOUN VERB.
  const std::string verb = noArgVerb(noun) || rest.size() < 2 ? "" : rest[1];
  const Command* cmd = findCommand(noun, verb);
  bool known_noun = false;
  for (const Command& c : kCommands) known_noun = known_noun || noun == c.noun;
  if (help) {
    if (cmd != nullptr) {
      printCommandHelp(out, *cmd);
    } else {
      printUsage(out, known_noun ? noun : "");
    }
    return kExitOk;
  }

  // Errors are collected first so that --json can turn the failure into one
  // JSON line; warnings of a successful command are passed on as text.
  std::ostringstream errbuf;
  int rc = kExitUsage;
  bool json = std::find(rest.begin(), rest.end(), "--json") != rest.end();
  if (cmd == nullptr) {
    if (known_noun && verb.empty()) {
      errbuf << "eqctl: " << noun << " needs a command\n";
    } else {
      errbuf << "eqctl: unknown command '" << noun << (verb.empty() ? "" : " ") << verb << "'\n";
    }
  } else {
    Args a;
    if (parseArgs(rest, noArgVerb(noun) ? 1 : 2, &a, errbuf)) {
      rc = runCommand(*cmd, store, opts, a, out, errbuf);
    }
  }
  std::string text = errbuf.str();
  if (rc == kExitOk || !json) {
    err << text;
    if (rc == kExitUsage) {
      if (cmd != nullptr) {
        err << "usage: eqctl " << cmd->synopsis << "\n(eqctl " << noun << (verb.empty() ? "" : " ")
            << verb << " --help for details)\n";
      } else {
        printUsage(err, known_noun ? noun : "");
      }
    }
    return rc;
  }
  // The message is the first error line without its "eqctl: " prefix.
  std::string msg = text.substr(0, text.find('\n'));
  if (msg.rfind("eqctl: ", 0) == 0) msg.erase(0, 7);
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("exit_code");
  w.Int(rc);
  putString(w, "kind", exitKind(rc));
  putString(w, "message", msg);
  w.EndObject();
  w.EndObject();
  err << sb.GetString() << "\n";
  return rc;
}

}  // namespace eq::tools

// The engine-independent part of the database seam: URLs, placeholders and
// the choice of engine.
#include "store/db.h"

namespace eq::store {

Result<DbUrl> DbUrl::parse(std::string_view url) {
  if (url.empty()) return Status(400, "the database URL is empty");
  DbUrl out;
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) {
    out.engine = DbEngine::kPostgres;
    out.target = std::string(url);
    return out;
  }
  if (url.starts_with("sqlite:")) url.remove_prefix(7);
  if (url.starts_with("//")) url.remove_prefix(2);  // sqlite:///var/eq.db
  if (url == ":memory:") return DbUrl{DbEngine::kSqlite, std::string(url)};
  const size_t colon = url.find(':');
  const size_t slash = url.find('/');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon < slash)) {
    return Status(400, "unknown database URL scheme in '" + std::string(url.substr(0, colon)) +
                           ":...' (want sqlite:PATH or postgresql://...)");
  }
  if (url.empty()) return Status(400, "sqlite: needs a file path");
  out.engine = DbEngine::kSqlite;
  out.target = std::string(url);
  return out;
}

std::string DbUrl::redacted() const {
  if (engine == DbEngine::kSqlite) return "sqlite:" + target;
  std::string out = target;
  // scheme://user:password@host...: the password from the first ':' after
  // the scheme to the last '@' of the whole URL. A password may hold '?',
  // '@' or '/' unencoded; taking too much (an '@' in a query value) hides
  // some of the host, which is harmless, never some of the password.
  const size_t start = out.find("://") + 3;
  const size_t at = out.rfind('@');
  if (at != std::string::npos && at > start) {
    const size_t colon = out.find(':', start);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  // ...?password=secret&...: libpq reads it there too.
  for (size_t p = out.find('?'); p != std::string::npos; p = out.find('&', p + 1)) {
    if (out.compare(p + 1, 9, "password=") != 0) continue;
    const size_t from = p + 10;
    const size_t to = out.find('&', from);
    out.replace(from, (to == std::string::npos ? out.size() : to) - from, "***");
  }
  return out;
}

std::string numberPlaceholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    // Quoted text and comments are copied as they are.
    size_t end = std::string_view::npos;
    if (c == '\'' || c == '"') {
      end = sql.find(c, i + 1);
    } else if (sql.compare(i, 2, "--") == 0) {
      end = sql.find('\n', i);
    } else if (sql.compare(i, 2, "/*") == 0) {
      end = sql.find("*/", i + 2);
      if (end != std::string_view::npos) ++end;
    } else {
      if (c == '?' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9') {
        out.push_back('$');  // ?N: SQLite's numbered form is PostgreSQL's $N
      } else if (c == '?') {
        out += "$" + std::to_string(++n);
      } else {
        out.push_back(c);
      }
      continue;
    }
    if (end == std::string_view::npos) end = sql.size() - 1;
    out.append(sql.substr(i, end - i + 1));
    i = end;
  }
  return out;
}

Result<int64_t> Db::exec(const Sql& sql, std::initializer_list<Value> values, const RowFn& onRow) {
  return execValues(sql, std::span<const Value>(values.begin(), values.size()), onRow);
}

Result<int64_t> Db::execValues(const Sql& sql, std::span<const Value> values, const RowFn& onRow) {
  Result<int64_t> out = run(sql, values, onRow);
  noteResult(out.isOk(), out.isOk() ? out.value() : 0);
  return out;
}

Status Db::script(std::string_view sql) {
  Status st = runScript(sql);
  // A script's changes are not counted: scripts are schemas and migrations.
  noteResult(st.isOk(), 0);
  return st;
}

Status Db::queue(const Sql& sql, std::initializer_list<Value> values) {
  const std::span<const Value> vals(values.begin(), values.size());
  if (levels_.empty()) return execValues(sql, vals).status();
  Status st = hold(sql, vals);
  if (!st.isOk()) levels_.back().failed = true;
  return st;
}

Status Db::hold(const Sql& sql, std::span<const Value> values) {
  Result<int64_t> out = run(sql, values, {});
  noteResult(out.isOk(), out.isOk() ? out.value() : 0);
  return out.status();
}

Status Db::relaxDurability() {
  if (levels_.empty()) return Status(500, "relaxDurability outside a transaction");
  return relax();
}

void Db::noteHeld(bool ok, int64_t changed, bool control, std::string_view why) {
  if (ok) {
    noteResult(ok, changed);
    return;
  }
  if (levels_.empty()) return;
  for (size_t i = control ? 0 : levels_.size() - 1; i < levels_.size(); ++i) {
    levels_[i].failed = true;
    if (levels_[i].why.empty()) levels_[i].why = std::string(why);
  }
}

// The message of a spoiled level's commit.
std::string Db::spoiled(const Level& level, std::string_view what) {
  std::string out = "a statement of the " + std::string(what) + " failed";
  if (!level.why.empty()) out += " (" + level.why + ")";
  return out + "; rolled back";
}

void Db::noteResult(bool ok, int64_t changed) {
  if (!ok) {
    if (!levels_.empty()) levels_.back().failed = true;
    return;
  }
  if (changed <= 0) return;
  if (levels_.empty()) {
    storage_failing_ = false;  // a write outside a transaction committed
  } else {
    levels_.back().changed = true;
  }
}

std::string Db::controlText(Control op, size_t depth, std::string_view begin) {
  switch (op) {
    case Control::kBegin:
      return std::string(begin);
    case Control::kCommit:
      return "COMMIT";
    case Control::kRollback:
      return "ROLLBACK";
    case Control::kSavepoint:
      return "SAVEPOINT sp" + std::to_string(depth);
    case Control::kRelease:
      return "RELEASE sp" + std::to_string(depth);
    case Control::kRollbackTo:
      return "ROLLBACK TO sp" + std::to_string(depth);
  }
  return {};
}

bool Db::inTransaction() const { return !levels_.empty() && transactionOpen(); }

Status Db::begin() {
  // The engine ended the transaction by itself (SQLite, after a full disk):
  // the levels it had are gone.
  if (!levels_.empty() && !transactionOpen()) levels_.clear();
  const size_t depth = levels_.size();
  if (Status st = control(depth == 0 ? Control::kBegin : Control::kSavepoint, depth); !st.isOk()) {
    // A savepoint refused (a lost connection) spoils the level it was in.
    if (!levels_.empty()) levels_.back().failed = true;
    return st;
  }
  levels_.emplace_back();
  return Status::ok();
}

Status Db::commit() {
  if (levels_.empty()) return Status(500, "commit without a transaction");
  // What the level holds is answered before its outcome is decided.
  sendHeld();
  if (!transactionOpen()) {
    // After a full disk or an I/O error SQLite may have rolled the whole
    // transaction back already: nothing of it was kept.
    levels_.clear();
    return Status(503, "the transaction was rolled back");
  }
  const Level level = levels_.back();
  levels_.pop_back();
  const size_t depth = levels_.size();
  if (depth > 0) {
    if (level.failed) {
      control(Control::kRollbackTo, depth);
      control(Control::kRelease, depth);
      return Status(503, spoiled(level, "savepoint"));
    }
    Status st = control(Control::kRelease, depth);
    if (!st.isOk()) {
      levels_.back().failed = true;
    } else if (level.changed) {
      levels_.back().changed = true;
    }
    return st;
  }
  if (level.failed) {
    control(Control::kRollback, 0);
    return Status(503, spoiled(level, "transaction"));
  }
  Status st = control(Control::kCommit, 0);
  // A failed COMMIT (disk full) can leave the transaction open, holding the
  // write lock from every other process.
  if (!st.isOk() && transactionOpen()) control(Control::kRollback, 0);
  // A transaction that changed nothing writes nothing, so only one that
  // changed rows tells that the storage works again.
  if (st.isOk() && level.changed) storage_failing_ = false;
  return st;
}

void Db::rollback() {
  if (levels_.empty()) return;
  sendHeld();  // their failures are this level's, not the one outside it
  levels_.pop_back();
  if (!transactionOpen()) {
    levels_.clear();
    return;
  }
  const size_t depth = levels_.size();
  if (depth == 0) {
    control(Control::kRollback, 0);
    return;
  }
  control(Control::kRollbackTo, depth);
  control(Control::kRelease, depth);
}

Result<std::unique_ptr<Db>> Db::open(const DbUrl& url) {
  return url.engine == DbEngine::kSqlite ? detail::openSqlite(url.target)
                                         : detail::openPostgres(url.target);
}

}  // namespace eq::store

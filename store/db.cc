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
  // scheme://user:password@host...: the password between the first ':'
  // after the scheme and the last '@' of the authority (a password may
  // hold an unencoded '/' or '@').
  const size_t start = out.find("://") + 3;
  const size_t query = out.find('?', start);
  const size_t at = out.rfind('@', query == std::string::npos ? std::string::npos : query);
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
      if (c == '?') {
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

Result<std::unique_ptr<Db>> Db::open(const DbUrl& url) {
  return url.engine == DbEngine::kSqlite ? detail::openSqlite(url.target)
                                         : detail::openPostgres(url.target);
}

}  // namespace eq::store

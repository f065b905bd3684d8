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
  // scheme://user:password@host...: the password between the first ':'
  // after the scheme and the '@' of the authority.
  const size_t start = target.find("://") + 3;
  const size_t at = target.find('@', start);
  const size_t slash = target.find('/', start);
  if (at == std::string::npos || (slash != std::string::npos && slash < at)) return target;
  const size_t colon = target.find(':', start);
  if (colon == std::string::npos || colon > at) return target;
  return target.substr(0, colon + 1) + "***" + target.substr(at);
}

std::string numberPlaceholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  char quote = 0;  // the quote we are inside of, if any
  for (char c : sql) {
    if (quote != 0) {
      if (c == quote) quote = 0;
      out.push_back(c);
    } else if (c == '\'' || c == '"') {
      quote = c;
      out.push_back(c);
    } else if (c == '?') {
      out += "$" + std::to_string(++n);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Result<std::unique_ptr<Db>> Db::open(const DbUrl& url) {
  return url.engine == DbEngine::kSqlite ? detail::openSqlite(url.target)
                                         : detail::openPostgres(url.target);
}

}  // namespace eq::store

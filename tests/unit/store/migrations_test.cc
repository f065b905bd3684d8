// The migrations of both engines (store/migrations.h) on a real SQLite file
// and the private PostgreSQL of scripts/test (EQ_TEST_PG_URL, each case in
// a schema of its own): applied once, in order, the same tables and
// columns on both, and once only when two hosts start together.
#include "store/migrations.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "common/config.h"
#include "store/store.h"

using eq::Status;
using eq::store::Db;
using eq::store::DbUrl;
using eq::store::Row;
using eq::store::Sql;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::unique_ptr<Db> open(const std::string& url) {
  auto db = Db::open(DbUrl::parse(url).value());
  BOOST_TEST_REQUIRE(db.isOk(), db.status().msg());
  return std::move(db).value();
}

struct SqliteFile {
  std::string path;
  SqliteFile() {
    std::string tmpl = "/tmp/eq-mig-XXXXXX";
    ::close(mkstemp(tmpl.data()));
    path = tmpl;
  }
  ~SqliteFile() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  }
};

// A connection to the test server in a fresh schema of its own.
std::unique_ptr<Db> pgInSchema(const std::string& schema, bool fresh) {
  auto db = open(env("EQ_TEST_PG_URL"));
  if (fresh) {
    BOOST_TEST_REQUIRE(
        db->script("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema).isOk());
  }
  BOOST_TEST_REQUIRE(db->script("SET search_path = " + schema).isOk());
  return db;
}

bool havePg() {
  if (!env("EQ_TEST_PG_URL").empty()) return true;
  BOOST_TEST(env("EQ_TEST_REQUIRE_PG") != "1",
             "EQ_TEST_REQUIRE_PG=1 but EQ_TEST_PG_URL is not set");
  return false;
}

// The test server's URL, or "" (a failure under EQ_TEST_REQUIRE_PG=1).
std::string pgTestUrl() { return havePg() ? env("EQ_TEST_PG_URL") : ""; }

// postgresql://user:password@host... with another password.
std::string withPassword(const std::string& url, const std::string& password) {
  const size_t colon = url.find(':', url.find("://") + 3);
  const size_t at = url.rfind('@');
  BOOST_TEST_REQUIRE((colon != std::string::npos && at != std::string::npos && colon < at));
  return url.substr(0, colon + 1) + password + url.substr(at);
}

// A loopback port bound but not listening: connections to it are refused
// while *fd stays open.
int refusingLoopbackPort(int* fd) {
  *fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_TEST_REQUIRE(::bind(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(*fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

void expectAllApplied(Db& db) {
  auto states = eq::store::migrationStatus(db);
  BOOST_TEST_REQUIRE(states.isOk(), states.status().msg());
  BOOST_TEST(states.value().size() == eq::store::migrations().size());
  for (const auto& s : states.value()) BOOST_TEST(s.applied_at_ms.has_value(), s.version);
}

// table -> its columns, from the engine's catalog.
std::map<std::string, std::set<std::string>> columns(Db& db) {
  std::map<std::string, std::set<std::string>> out;
  if (db.engine() == eq::store::DbEngine::kSqlite) {
    std::set<std::string> tables;
    BOOST_TEST_REQUIRE(db.exec(Sql{"SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                   "name NOT LIKE 'sqlite_%'"},
                               {}, [&](const Row& r) { tables.emplace(r.text(0)); })
                           .isOk());
    for (const std::string& t : tables) {
      BOOST_TEST_REQUIRE(
          db.exec(Sql{"SELECT name FROM pragma_table_info(?)"}, {t}, [&](const Row& r) {
              out[t].emplace(r.text(0));
            }).isOk());
    }
  } else {
    BOOST_TEST_REQUIRE(
        db.exec(Sql{"SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema()"},
                {}, [&](const Row& r) { out[std::string(r.text(0))].emplace(r.text(1)); })
            .isOk());
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(migrations)

BOOST_AUTO_TEST_CASE(sqlite_applies_each_once_and_knows_the_stores_own_records) {
  SqliteFile fresh;
  auto db = open("sqlite:" + fresh.path);
  auto before = eq::store::migrationStatus(*db);
  BOOST_TEST_REQUIRE(before.isOk(), before.status().msg());
  for (const auto& s : before.value()) BOOST_TEST(!s.applied_at_ms.has_value());
  BOOST_TEST_REQUIRE(eq::store::migrate(*db).isOk());
  expectAllApplied(*db);
  BOOST_TEST(eq::store::migrate(*db).isOk());  // nothing left to do
  // A database the store made (Store::open migrates on its own connection)
  // is up to date for the seam too: one list, one record per version.
  SqliteFile made;
  BOOST_TEST_REQUIRE(eq::Store::open(made.path).isOk());
  auto other = open("sqlite:" + made.path);
  expectAllApplied(*other);
  BOOST_TEST(eq::store::migrate(*other).isOk());
  BOOST_TEST((columns(*db) == columns(*other)));
}

BOOST_AUTO_TEST_CASE(postgres_has_the_same_tables_and_columns) {
  if (!havePg()) return;
  SqliteFile file;
  auto lite = open("sqlite:" + file.path);
  BOOST_TEST_REQUIRE(eq::store::migrate(*lite).isOk());
  auto pg = pgInSchema("eq_test_migrations", true);
  const Status st = eq::store::migrate(*pg);
  BOOST_TEST_REQUIRE(st.isOk(), st.msg());
  expectAllApplied(*pg);
  BOOST_TEST(eq::store::migrate(*pg).isOk());
  const auto a = columns(*lite);
  const auto b = columns(*pg);
  for (const auto& [table, cols] : a) {
    BOOST_TEST_CONTEXT(table) {
      BOOST_TEST_REQUIRE(b.count(table) == 1u);
      BOOST_TEST((cols == b.at(table)));
    }
  }
  BOOST_TEST(a.size() == b.size());
  // The key epoch's triggers work on PostgreSQL too.
  BOOST_TEST(pg->script("INSERT INTO accounts (id, name, quota_fast, quota_standard, "
                        "quota_perfect, quota_expire_at, webhook_secret, created_at) VALUES "
                        "('a', 'a', 1, 1, 1, 0, 's', 0); UPDATE accounts SET "
                        "rate_limit_per_min = 5")
                 .isOk());
  int64_t epoch = -1;
  BOOST_TEST(pg->exec(Sql{"SELECT epoch FROM key_epoch"}, {}, [&](const Row& r) {
                 epoch = r.int64(0);
               }).isOk());
  BOOST_TEST(epoch == 1);
  BOOST_TEST(pg->script("DROP SCHEMA eq_test_migrations CASCADE").isOk());
}

BOOST_AUTO_TEST_CASE(two_hosts_starting_together_apply_each_migration_once) {
  if (!havePg()) return;
  pgInSchema("eq_test_race", true);
  // Two connections, as two hosts, migrating at the same moment: without
  // the advisory lock one would fail on the other's tables or records.
  Status results[2];
  std::thread hosts[2];
  for (int i = 0; i < 2; ++i) {
    hosts[i] = std::thread([&results, i] {
      auto db = open(env("EQ_TEST_PG_URL"));
      if (Status st = db->script("SET search_path = eq_test_race"); !st.isOk()) {
        results[i] = st;
        return;
      }
      results[i] = eq::store::migrate(*db);
    });
  }
  for (auto& h : hosts) h.join();
  BOOST_TEST(results[0].isOk(), results[0].msg());
  BOOST_TEST(results[1].isOk(), results[1].msg());
  auto db = pgInSchema("eq_test_race", false);
  int64_t records = 0;
  BOOST_TEST(db->exec(Sql{"SELECT count(*) FROM schema_migrations"}, {}, [&](const Row& r) {
                 records = r.int64(0);
               }).isOk());
  BOOST_TEST(records == static_cast<int64_t>(eq::store::migrations().size()));
  BOOST_TEST(db->script("DROP SCHEMA eq_test_race CASCADE").isOk());
}

BOOST_AUTO_TEST_CASE(the_services_read_the_store_from_EQ_DB_URL_or_else_EQ_DB_PATH) {
  const auto configWith = [](const char* url, const char* path) {
    if (url != nullptr) setenv("EQ_DB_URL", url, 1);
    if (path != nullptr) setenv("EQ_DB_PATH", path, 1);
    eq::Result<eq::Config> c = eq::Config::fromEnv();
    unsetenv("EQ_DB_URL");
    unsetenv("EQ_DB_PATH");
    return c;
  };
  BOOST_TEST(configWith(nullptr, "/data/eq.db").value().db_url == "sqlite:/data/eq.db");
  BOOST_TEST(configWith("sqlite:///data/eq.db", "/other.db").value().db_url ==
             "sqlite:///data/eq.db");
  BOOST_TEST(configWith("postgresql://eq:pw@db/eq", nullptr).value().db_url ==
             "postgresql://eq:pw@db/eq");
  // A scheme nobody reads stops the process at start, without echoing the
  // URL (it may hold a password).
  const auto mysql = configWith("mysql://eq:secret@db/eq", nullptr);
  BOOST_TEST(!mysql.isOk());
  BOOST_TEST(mysql.status().msg().find("secret") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(opening_a_url_says_whether_to_try_again_and_never_shows_the_password) {
  // A URL that cannot be read: the operator's to fix.
  // A URL that cannot be read: the operator's to fix, and libpq's words
  // about it, which may quote the password, are never passed on.
  for (const char* url :
       {"postgresql://eq:secret@db/eq?no_such_option=1", "postgresql://eq:s3cr%et@127.0.0.1:1/eq",
        "postgresql://eq:secret@[::1/eq", "postgresql://eq:secret@127.0.0.1:abc/eq",
        "postgresql://eq:secret@127.0.0.1:1/eq?sslmode=bogus"}) {
    auto bad = eq::Store::openUrl(url);
    BOOST_TEST(bad.status().code() == 400, url << ": " << bad.status().msg());
    BOOST_TEST(bad.status().msg().find("secret") == std::string::npos, bad.status().msg());
    BOOST_TEST(bad.status().msg().find("s3cr") == std::string::npos, bad.status().msg());
  }
  BOOST_TEST(eq::Store::openUrl("sqlite::memory:").isOk());
  // Nothing listens: a server that cannot be reached now, tried again.
  int fd = -1;
  const int port = refusingLoopbackPort(&fd);
  auto down =
      eq::Store::openUrl("postgresql://eq:secret@127.0.0.1:" + std::to_string(port) + "/eq");
  ::close(fd);
  BOOST_TEST(down.status().code() == 503);
  BOOST_TEST(down.status().msg().find("secret") == std::string::npos);
  BOOST_TEST(down.status().msg().find("***") != std::string::npos);
  // The server answers and refuses the password: for good.
  const std::string url = pgTestUrl();
  if (url.empty()) return;  // EQ_TEST_REQUIRE_PG makes this a failure (temp_db.h)
  const std::string wrong = withPassword(url, "not-the-password");
  auto refused = eq::Store::openUrl(wrong);
  BOOST_TEST(refused.status().code() == 400, refused.status().msg());
  BOOST_TEST(refused.status().msg().find("not-the-password") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

// The migrations of both engines (store/migrations.h) on a real SQLite file
// and the private PostgreSQL of scripts/test (EQ_TEST_PG_URL, each case in
// a schema of its own): applied once, in order, the same tables and
// columns on both, and once only when two hosts start together.
#include "store/migrations.h"

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
    BOOST_TEST_REQUIRE(db->script("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " +
                                  schema)
                           .isOk());
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
      BOOST_TEST_REQUIRE(db.exec(Sql{"SELECT name FROM pragma_table_info(?)"}, {t},
                                 [&](const Row& r) { out[t].emplace(r.text(0)); })
                             .isOk());
    }
  } else {
    BOOST_TEST_REQUIRE(db.exec(Sql{"SELECT table_name, column_name FROM information_schema.columns "
                                   "WHERE table_schema = current_schema()"},
                               {}, [&](const Row& r) {
                                 out[std::string(r.text(0))].emplace(r.text(1));
                               })
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

BOOST_AUTO_TEST_CASE(the_services_take_a_sqlite_url_and_refuse_what_they_cannot_run_on) {
  const auto dbPathWith = [](const char* url) {
    setenv("EQ_DB_URL", url, 1);
    eq::Result<eq::Config> c = eq::Config::fromEnv();
    unsetenv("EQ_DB_URL");
    return c;
  };
  BOOST_TEST(dbPathWith("sqlite:/data/eq.db").value().db_path == "/data/eq.db");
  BOOST_TEST(dbPathWith("sqlite:///data/eq.db").value().db_path == "/data/eq.db");
  // PostgreSQL is eqctl migrate's only, for now: a service that would
  // ignore the URL and open a file nobody meant says so at start instead.
  const auto pg = dbPathWith("postgresql://eq:pw@db/eq");
  BOOST_TEST(!pg.isOk());
  BOOST_TEST(pg.status().msg().find("do not run on PostgreSQL yet") != std::string::npos);
  BOOST_TEST(!dbPathWith("mysql://db/eq").isOk());
}

BOOST_AUTO_TEST_SUITE_END()

// A fresh database per test: the real Store with every migration applied,
// on SQLite (a file of its own under /tmp, removed with its WAL files when
// the fixture goes) or on the PostgreSQL server of scripts/test
// (EQ_TEST_PG_URL; a schema of its own, dropped when the fixture goes).
// Unit fixtures that need a database derive from it, so their own members
// (a Dispatcher borrowing the store, say) are destroyed before the store.
//
// The engine is the one the running case was registered for: a case
// written with EQ_STORE_TEST_CASE (or EQ_STORE_FIXTURE_TEST_CASE) runs
// twice, as NAME_sqlite and NAME_postgres; every other case runs on SQLite.
// Without EQ_TEST_PG_URL the PostgreSQL half passes empty, unless
// EQ_TEST_REQUIRE_PG=1 (scripts/test) makes it a failure.
#pragma once

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/crypto.h"
#include "common/timefmt.h"
#include "store/db.h"
#include "store/store.h"

namespace eq::test {

enum class Engine { kSqlite, kPostgres };

// The engine of the running case (set by runOn below).
inline Engine& currentEngine() {
  static Engine engine = Engine::kSqlite;
  return engine;
}

inline std::string testPgUrl() {
  const char* v = std::getenv("EQ_TEST_PG_URL");
  return v != nullptr ? v : "";
}

// Whether the PostgreSQL half can run; when it cannot, a failure under
// EQ_TEST_REQUIRE_PG=1.
inline bool havePostgres() {
  if (!testPgUrl().empty()) return true;
  const char* require = std::getenv("EQ_TEST_REQUIRE_PG");
  BOOST_TEST((require == nullptr || std::string(require) != "1"),
             "EQ_TEST_REQUIRE_PG=1 but EQ_TEST_PG_URL is not set: the PostgreSQL half did not run");
  return false;
}

struct TempDb {
  std::string path;      // SQLite: the file; PostgreSQL: empty
  std::string schema;    // PostgreSQL: this database's schema; SQLite: empty
  store::DbUrl url;      // for more connections to the same database
  std::unique_ptr<Store> store;

  explicit TempDb(const std::string& name = "store") {
    if (currentEngine() == Engine::kSqlite) {
      std::string tmpl = "/tmp/eq-" + name + "-XXXXXX";
      ::close(mkstemp(tmpl.data()));
      path = tmpl;
      url = store::DbUrl{store::DbEngine::kSqlite, path};
    } else {
      // A schema per case, named at random so that runs side by side (two
      // engineers, two builds) never meet; the connections of the store
      // and of the case find it through search_path.
      schema = "eq_t_" + crypto::hex(crypto::randomBytes(6));
      const std::string base = testPgUrl();
      BOOST_REQUIRE_MESSAGE(!base.empty(), "EQ_TEST_PG_URL is not set");
      const auto admin = mustOpen(store::DbUrl::parse(base).value());
      BOOST_REQUIRE(admin->script("CREATE SCHEMA " + schema).isOk());
      url = store::DbUrl::parse(base + (base.find('?') == std::string::npos ? "?" : "&") +
                                "options=-csearch_path%3D" + schema)
                .value();
    }
    auto s = Store::open(url);
    BOOST_REQUIRE_MESSAGE(s.isOk(), "cannot open " << url.redacted() << ": " << s.status().msg());
    store = std::move(s).value();
  }
  ~TempDb() {
    store.reset();
    if (!path.empty()) {
      for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
    }
    if (!schema.empty()) {
      auto admin = store::Db::open(store::DbUrl::parse(testPgUrl()).value());
      if (admin.isOk()) admin.value()->script("DROP SCHEMA " + schema + " CASCADE");
    }
  }
  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;

  // Another Store on the same database, as another process would open it.
  std::unique_ptr<Store> openAnother() const {
    auto s = Store::open(url);
    BOOST_REQUIRE_MESSAGE(s.isOk(), s.status().msg());
    return std::move(s).value();
  }

  // A raw connection to the same database, bypassing the Store.
  std::unique_ptr<store::Db> raw() const { return mustOpen(url); }

  // The first cell of the first row of `sql` as bytes (a number as its
  // text); empty when there is no row or it is NULL.
  std::string scalar(const std::string& sql) const {
    std::string out;
    auto r = raw()->exec(store::Sql{sql}, {}, [&](const store::Row& row) {
      if (out.empty() && !row.isNull(0)) out = row.blob(0);
    });
    BOOST_REQUIRE_MESSAGE(r.isOk(), sql << ": " << r.status().msg());
    return out;
  }

  // The first cell of every row of `sql`, joined by ','.
  std::string column(const std::string& sql) const {
    std::string out;
    auto r = raw()->exec(store::Sql{sql}, {}, [&](const store::Row& row) {
      if (!out.empty()) out += ",";
      out += row.text(0);
    });
    BOOST_REQUIRE_MESSAGE(r.isOk(), sql << ": " << r.status().msg());
    return out;
  }

  // Runs statements without values on a raw connection.
  Status script(const std::string& sql) const { return raw()->script(sql); }

  // A key with `units` in every mode, expiring in a day.
  CreatedKey newKey(int64_t units = 100, const std::string& env = "production") {
    NewKeyRequest req;
    req.name = "test";
    req.env = env;
    req.quota = QuotaUnits{units, units, units};
    req.expire_at_ms = nowMs() + 86'400'000;
    auto k = store->createKey(req);
    BOOST_REQUIRE_MESSAGE(k.isOk(), k.status().msg());
    return k.value();
  }

 private:
  static std::unique_ptr<store::Db> mustOpen(const store::DbUrl& url) {
    auto db = store::Db::open(url);
    BOOST_REQUIRE_MESSAGE(db.isOk(), "cannot open " << url.redacted() << ": " << db.status().msg());
    return std::move(db).value();
  }
};

struct NoFixture {};

// Runs one case (a fixture type with test_method()) on `engine`.
template <typename Case>
void runOn(Engine engine) {
  if (engine == Engine::kPostgres && !havePostgres()) return;
  struct Scope {
    explicit Scope(Engine e) { currentEngine() = e; }
    ~Scope() { currentEngine() = Engine::kSqlite; }
  } scope(engine);
  Case c;
  c.test_method();
}

}  // namespace eq::test

// A case that runs once on each engine (see the top of this file).
#define EQ_STORE_FIXTURE_TEST_CASE(name, fixture)                                     \
  struct name : fixture {                                                             \
    void test_method();                                                               \
  };                                                                                  \
  BOOST_AUTO_TEST_CASE(name##_sqlite) { ::eq::test::runOn<name>(::eq::test::Engine::kSqlite); } \
  BOOST_AUTO_TEST_CASE(name##_postgres) {                                             \
    ::eq::test::runOn<name>(::eq::test::Engine::kPostgres);                           \
  }                                                                                   \
  void name::test_method()
#define EQ_STORE_TEST_CASE(name) EQ_STORE_FIXTURE_TEST_CASE(name, ::eq::test::NoFixture)

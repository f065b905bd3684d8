// The database seam (store/db.h) on both engines: a real SQLite file, and
// the private PostgreSQL server scripts/test starts (EQ_TEST_PG_URL). Every
// case runs on each engine there is; with EQ_TEST_REQUIRE_PG=1 (scripts/test)
// a missing server is a failure, never a skipped half.
#include "store/db.h"

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using eq::Status;
using eq::store::Db;
using eq::store::DbEngine;
using eq::store::DbUrl;
using eq::store::Row;
using eq::store::Sql;
using eq::store::Transaction;

namespace {

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : fallback;
}

// A fresh SQLite file, removed with its WAL files afterwards.
struct SqliteFile {
  std::string path;
  SqliteFile() {
    std::string tmpl = "/tmp/eq-db-XXXXXX";
    ::close(mkstemp(tmpl.data()));
    path = tmpl;
  }
  ~SqliteFile() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  }
};

std::unique_ptr<Db> mustOpen(const std::string& url) {
  auto parsed = DbUrl::parse(url);
  BOOST_TEST_REQUIRE(parsed.isOk(), parsed.status().msg());
  auto db = Db::open(parsed.value());
  BOOST_TEST_REQUIRE(db.isOk(), db.status().msg());
  return std::move(db).value();
}

// Runs fn once per engine with an open database whose table `t` is empty,
// and a URL to open more connections to the same database.
void onEveryEngine(const std::function<void(Db&, const std::string& url)>& fn) {
  const char* kTable =
      "DROP TABLE IF EXISTS t; CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
      "score DOUBLE PRECISION, note TEXT)";
  {
    SqliteFile file;
    const std::string url = "sqlite:" + file.path;
    auto db = mustOpen(url);
    BOOST_TEST_REQUIRE(db->script(kTable).isOk());
    BOOST_TEST_CONTEXT("sqlite") { fn(*db, url); }
  }
  const std::string pg = envOr("EQ_TEST_PG_URL", "");
  if (pg.empty()) {
    BOOST_TEST(
        envOr("EQ_TEST_REQUIRE_PG", "0") != "1",
        "EQ_TEST_REQUIRE_PG=1 but EQ_TEST_PG_URL is not set: the PostgreSQL half did not run");
    return;
  }
  auto db = mustOpen(pg);
  BOOST_TEST_REQUIRE(db->script(kTable).isOk());
  BOOST_TEST_CONTEXT("postgres") { fn(*db, pg); }
  BOOST_TEST(db->script("DROP TABLE t").isOk());
}

const Sql kInsert{"INSERT INTO t (id, name, score, note) VALUES (?, ?, ?, ?)"};
const Sql kCount{"SELECT count(*) FROM t"};

int64_t count(Db& db) {
  int64_t n = -1;
  auto r = db.exec(kCount, {}, [&](const Row& row) { n = row.int64(0); });
  BOOST_TEST_REQUIRE(r.isOk(), r.status().msg());
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(db_seam)

BOOST_AUTO_TEST_CASE(urls_choose_the_engine_and_hide_the_password) {
  auto a = DbUrl::parse("sqlite:/var/lib/eq/eq.db");
  BOOST_TEST_REQUIRE(a.isOk());
  BOOST_TEST((a.value().engine == DbEngine::kSqlite));
  BOOST_TEST(a.value().target == "/var/lib/eq/eq.db");
  BOOST_TEST(DbUrl::parse("sqlite:///var/eq.db").value().target == "/var/eq.db");
  BOOST_TEST(DbUrl::parse("/data/eq.db").value().target == "/data/eq.db");
  auto p = DbUrl::parse("postgresql://eq:s3cret@db.internal:5432/eq?sslmode=require");
  BOOST_TEST_REQUIRE(p.isOk());
  BOOST_TEST((p.value().engine == DbEngine::kPostgres));
  BOOST_TEST(p.value().redacted() == "postgresql://eq:***@db.internal:5432/eq?sslmode=require");
  BOOST_TEST(DbUrl::parse("postgres://db/eq").value().redacted() == "postgres://db/eq");
  BOOST_TEST(
      DbUrl::parse("postgresql://db/eq?sslmode=require&password=s3cret&x=1").value().redacted() ==
      "postgresql://db/eq?sslmode=require&password=***&x=1");
  BOOST_TEST(DbUrl::parse("postgresql://eq:a/b@c@db/eq").value().redacted() ==
             "postgresql://eq:***@db/eq");
  BOOST_TEST(DbUrl::parse("postgresql://eq:pa?ss@db/eq").value().redacted() ==
             "postgresql://eq:***@db/eq");
  for (const char* bad : {"", "mysql://root@db/eq", "sqlite:", "redis:6379"}) {
    auto r = DbUrl::parse(bad);
    BOOST_TEST(!r.isOk(), bad);
    BOOST_TEST(r.status().code() == 400, bad);
  }
}

BOOST_AUTO_TEST_CASE(placeholders_are_numbered_outside_quotes_and_comments) {
  BOOST_TEST(eq::store::numberPlaceholders("SELECT ? + ?, '?', \"a?\" FROM t WHERE x = ?") ==
             "SELECT $1 + $2, '?', \"a?\" FROM t WHERE x = $3");
  BOOST_TEST(eq::store::numberPlaceholders("SELECT ? -- why?\n, /* or? */ ?") ==
             "SELECT $1 -- why?\n, /* or? */ $2");
  // SQLite's numbered form is PostgreSQL's.
  BOOST_TEST(eq::store::numberPlaceholders("SELECT ?1 + ?2, ?1, ?12") == "SELECT $1 + $2, $1, $12");
}

BOOST_AUTO_TEST_CASE(values_round_trip_and_rows_are_read_by_column) {
  onEveryEngine([](Db& db, const std::string&) {
    const int64_t big = std::numeric_limits<int64_t>::max();
    const int64_t small = std::numeric_limits<int64_t>::min();
    BOOST_TEST(db.exec(kInsert, {big, std::string_view("情境 ✓ 'quoted'"), 0.1, nullptr}).isOk());
    auto changed = db.exec(kInsert, {small, std::string_view("b"), -2.5e300, std::string_view("")});
    BOOST_TEST_REQUIRE(changed.isOk(), changed.status().msg());
    BOOST_TEST(changed.value() == 1);
    std::vector<std::string> seen;
    auto r =
        db.exec(Sql{"SELECT id, name, score, note FROM t ORDER BY id"}, {}, [&](const Row& row) {
          BOOST_TEST(row.columns() == 4);
          seen.push_back(std::to_string(row.int64(0)) + "|" + std::string(row.text(1)) + "|" +
                         std::to_string(row.real(2)) + "|" +
                         (row.isNull(3) ? "NULL" : "'" + std::string(row.text(3)) + "'"));
        });
    BOOST_TEST_REQUIRE(r.isOk(), r.status().msg());
    BOOST_TEST_REQUIRE(seen.size() == 2u);
    BOOST_TEST(seen[0] == std::to_string(small) + "|b|" + std::to_string(-2.5e300) + "|''");
    BOOST_TEST(seen[1] ==
               std::to_string(big) + "|情境 ✓ 'quoted'|" + std::to_string(0.1) + "|NULL");
    // A statement is prepared once and runs again with other values.
    auto upd = db.exec(Sql{"UPDATE t SET score = score + ? WHERE id = ?"}, {int64_t{1}, big});
    BOOST_TEST_REQUIRE(upd.isOk(), upd.status().msg());
    BOOST_TEST(upd.value() == 1);
    BOOST_TEST(db.exec(Sql{"UPDATE t SET score = score + ? WHERE id = ?"}, {int64_t{1}, int64_t{7}})
                   .value() == 0);
    // Bytes that are not text (a digest) go in and come back as they were.
    const std::string bytes("\x00\xff\x10'\\x", 6);
    std::string back;
    auto blob = db.exec(Sql{"SELECT ?"}, {eq::store::Blob{bytes}},
                        [&](const Row& row) { back = row.blob(0); });
    BOOST_TEST_REQUIRE(blob.isOk(), blob.status().msg());
    BOOST_TEST((back == bytes));
    // A boolean reads as 0 or 1 on both engines.
    int64_t truth = -1;
    BOOST_TEST(
        db.exec(Sql{"SELECT 1 < 2"}, {}, [&](const Row& row) { truth = row.int64(0); }).isOk());
    BOOST_TEST(truth == 1);
  });
}

BOOST_AUTO_TEST_CASE(a_dialect_difference_lives_beside_its_statement) {
  // Each engine runs its own text; two statements that share their SQLite
  // text and differ in PostgreSQL's never share a prepared statement.
  const Sql which{"SELECT 'lite' || ?", "SELECT 'pg' || ?"};
  const Sql which2{"SELECT 'lite' || ?", "SELECT 'pg2' || ?"};
  const Sql upsert{
      "INSERT INTO t (id, name) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET note = 'again' "
      "RETURNING note"};
  onEveryEngine([&](Db& db, const std::string&) {
    const bool pg = db.engine() == DbEngine::kPostgres;
    std::string got;
    const auto read = [&](const Row& row) { got = std::string(row.text(0)); };
    BOOST_TEST(db.exec(which, {std::string_view("!")}, read).isOk());
    BOOST_TEST(got == (pg ? "pg!" : "lite!"));
    BOOST_TEST(db.exec(which2, {std::string_view("!")}, read).isOk());
    BOOST_TEST(got == (pg ? "pg2!" : "lite!"));
    // A text built at run time is its own statement too.
    const std::string built = std::string("SELECT 'b") + "uilt'";
    BOOST_TEST(db.exec(Sql{built}, {}, read).isOk());
    BOOST_TEST(got == "built");
    // The upsert and RETURNING, the same on both.
    BOOST_TEST(db.exec(upsert, {int64_t{1}, std::string_view("a")}, read).isOk());
    BOOST_TEST(got == "");
    BOOST_TEST(db.exec(upsert, {int64_t{1}, std::string_view("a")}, read).isOk());
    BOOST_TEST(got == "again");
    // A SELECT changes no row, whatever it returns.
    auto n = db.exec(kCount);
    BOOST_TEST_REQUIRE(n.isOk());
    BOOST_TEST(n.value() == 0);
  });
}

BOOST_AUTO_TEST_CASE(a_transaction_rolls_back_unless_committed) {
  onEveryEngine([](Db& db, const std::string& url) {
    {
      Transaction tx(db);
      BOOST_TEST_REQUIRE(tx.status().isOk(), tx.status().msg());
      BOOST_TEST(db.exec(kInsert, {int64_t{1}, std::string_view("a"), 1.0, nullptr}).isOk());
      BOOST_TEST(count(db) == 1);
    }  // no commit
    BOOST_TEST(count(db) == 0);
    {
      Transaction tx(db);
      BOOST_TEST(db.exec(kInsert, {int64_t{2}, std::string_view("b"), 1.0, nullptr}).isOk());
      // A second connection does not see it before the commit.
      auto other = mustOpen(url);
      BOOST_TEST(count(*other) == 0);
      BOOST_TEST(tx.commit().isOk());
      BOOST_TEST(count(*other) == 1);
    }
    // Inside a transaction another is a savepoint: a statement that fails
    // in it spoils it alone, and the outer one goes on to commit.
    {
      Transaction outer(db);
      BOOST_TEST_REQUIRE(outer.status().isOk());
      BOOST_TEST(db.exec(kInsert, {int64_t{3}, std::string_view("c"), 1.0, nullptr}).isOk());
      {
        Transaction inner(db);
        BOOST_TEST_REQUIRE(inner.status().isOk(), inner.status().msg());
        BOOST_TEST(db.exec(kInsert, {int64_t{4}, std::string_view("d"), 1.0, nullptr}).isOk());
        BOOST_TEST(
            db.exec(kInsert, {int64_t{5}, std::string_view("c"), 1.0, nullptr}).status().code() ==
            409);
        const Status c = inner.commit();
        BOOST_TEST(c.code() == 503, c.msg());
      }
      {
        Transaction inner(db);
        BOOST_TEST(db.exec(kInsert, {int64_t{6}, std::string_view("f"), 1.0, nullptr}).isOk());
      }  // no commit: this savepoint alone rolls back
      {
        Transaction inner(db);
        BOOST_TEST(db.exec(kInsert, {int64_t{7}, std::string_view("g"), 1.0, nullptr}).isOk());
        BOOST_TEST(inner.commit().isOk());
      }
      BOOST_TEST(db.inTransaction());
      const Status c = outer.commit();
      BOOST_TEST(c.isOk(), c.msg());
    }
    BOOST_TEST(!db.inTransaction());
    BOOST_TEST(count(db) == 3);  // b, c and g
  });
}

BOOST_AUTO_TEST_CASE(a_constraint_is_a_409_and_the_connection_goes_on) {
  onEveryEngine([](Db& db, const std::string&) {
    BOOST_TEST(db.exec(kInsert, {int64_t{1}, std::string_view("a"), 1.0, nullptr}).isOk());
    auto dup = db.exec(kInsert, {int64_t{2}, std::string_view("a"), 1.0, nullptr});
    BOOST_TEST(dup.status().code() == 409, dup.status().msg());
    auto missing = db.exec(kInsert, {int64_t{3}, nullptr, 1.0, nullptr});
    BOOST_TEST(missing.status().code() == 409, missing.status().msg());
    // Inside a transaction the failure spoils the transaction, not the
    // connection, on both engines: its commit rolls back and says so, and
    // the next transaction works.
    {
      Transaction tx(db);
      BOOST_TEST(db.exec(kInsert, {int64_t{4}, std::string_view("d"), 1.0, nullptr}).isOk());
      BOOST_TEST(
          db.exec(kInsert, {int64_t{5}, std::string_view("a"), 1.0, nullptr}).status().code() ==
          409);
      const Status c = tx.commit();
      BOOST_TEST(c.code() == 503, c.msg());
    }
    BOOST_TEST(count(db) == 1);  // "d" went with the transaction
    {
      Transaction tx(db);
      BOOST_TEST(db.exec(kInsert, {int64_t{4}, std::string_view("d"), 1.0, nullptr}).isOk());
      BOOST_TEST(tx.commit().isOk());
    }
    BOOST_TEST(db.exec(kInsert, {int64_t{6}, std::string_view("f"), 1.0, nullptr}).isOk());
    // Bad SQL is a bug: 500.
    BOOST_TEST(db.exec(Sql{"SELEC nothing"}).status().code() == 500);
    BOOST_TEST(db.exec(kInsert, {int64_t{7}}).status().code() == 500);
  });
}

BOOST_AUTO_TEST_CASE(a_queued_statement_runs_and_its_failure_spoils_its_level) {
  onEveryEngine([](Db& db, const std::string& url) {
    auto other = mustOpen(url);
    // Outside a transaction it runs at once.
    BOOST_TEST(db.queue(kInsert, {int64_t{1}, std::string_view("a"), 1.0, nullptr}).isOk());
    BOOST_TEST(count(*other) == 1);
    // Inside one, the next statement that waits sees it, and the commit
    // keeps it.
    {
      Transaction tx(db);
      BOOST_TEST_REQUIRE(tx.status().isOk());
      BOOST_TEST(db.inTransaction());
      BOOST_TEST(db.queue(kInsert, {int64_t{2}, std::string_view("b"), 1.0, nullptr}).isOk());
      BOOST_TEST(db.queue(kInsert, {int64_t{3}, std::string_view("c"), 1.0, nullptr}).isOk());
      BOOST_TEST(count(db) == 3);
      BOOST_TEST(count(*other) == 1);
      BOOST_TEST(tx.commit().isOk());
    }
    BOOST_TEST(count(*other) == 3);
    {
      Transaction outer(db);
      // One that fails (a duplicate name) spoils its savepoint, whichever
      // statement learns of it: the savepoint's commit is a 503 and the
      // outer transaction goes on.
      {
        Transaction inner(db);
        BOOST_TEST_REQUIRE(inner.status().isOk());
        BOOST_TEST(db.queue(kInsert, {int64_t{4}, std::string_view("d"), 1.0, nullptr}).isOk());
        db.queue(kInsert, {int64_t{5}, std::string_view("a"), 1.0, nullptr});
        db.queue(kInsert, {int64_t{6}, std::string_view("f"), 1.0, nullptr});
        const Status c = inner.commit();
        BOOST_TEST(c.code() == 503, c.msg());
        // Nobody else saw why: the commit says it.
        if (db.engine() == DbEngine::kPostgres) {
          BOOST_TEST(c.msg().find("duplicate key") != std::string::npos, c.msg());
        }
      }
      {
        // Learnt by a statement that waits: on PostgreSQL that statement
        // was sent after the failure and is skipped, a 503 too.
        Transaction inner(db);
        db.queue(kInsert, {int64_t{7}, std::string_view("a"), 1.0, nullptr});
        const auto n = db.exec(kCount);
        if (db.engine() == DbEngine::kPostgres) BOOST_TEST(n.status().code() == 503);
        BOOST_TEST(inner.commit().code() == 503);
      }
      {
        // Rolled back without a commit: what it queued goes with it.
        Transaction inner(db);
        BOOST_TEST(db.queue(kInsert, {int64_t{8}, std::string_view("h"), 1.0, nullptr}).isOk());
      }
      {
        Transaction inner(db);
        BOOST_TEST(db.queue(kInsert, {int64_t{9}, std::string_view("i"), 1.0, nullptr}).isOk());
        BOOST_TEST(inner.commit().isOk());
      }
      const Status c = outer.commit();
      BOOST_TEST(c.isOk(), c.msg());
    }
    BOOST_TEST(count(*other) == 4);  // a, b, c and i
    // Many queued without a statement that waits: sent in pipelines of a
    // bounded length, all kept.
    {
      Transaction tx(db);
      std::vector<std::string> names;
      for (int i = 0; i < 300; ++i) names.push_back("many" + std::to_string(i));
      for (int i = 0; i < 300; ++i) {
        BOOST_TEST(
            db.queue(kInsert, {int64_t{100 + i}, std::string_view(names[static_cast<size_t>(i)]),
                               1.0, nullptr})
                .isOk());
      }
      BOOST_TEST(tx.commit().isOk());
    }
    BOOST_TEST(count(*other) == 304);
    BOOST_TEST(db.exec(Sql{"DELETE FROM t WHERE id >= 100"}).value() == 300);
    // A transaction that ran nothing begins and commits as well.
    {
      Transaction tx(db);
      BOOST_TEST(db.inTransaction());
      BOOST_TEST(tx.commit().isOk());
    }
    BOOST_TEST(!db.inTransaction());
    // A statement the server cannot prepare is refused when queued.
    {
      Transaction tx(db);
      const Status bad = db.queue(Sql{"INSERT INTO nowhere VALUES (?)"}, {int64_t{1}});
      BOOST_TEST(bad.code() == 500, bad.msg());
      BOOST_TEST(tx.commit().code() == 503);
    }
    BOOST_TEST(count(db) == 4);
  });
}

BOOST_AUTO_TEST_CASE(a_relaxed_transaction_commits_without_waiting_for_the_disk) {
  onEveryEngine([](Db& db, const std::string& url) {
    BOOST_TEST(db.relaxDurability().code() == 500);  // outside a transaction
    const Sql kSetting{"SELECT 'sqlite'", "SELECT current_setting('synchronous_commit')"};
    auto setting = [&] {
      std::string out;
      auto r = db.exec(kSetting, {}, [&](const Row& row) { out = std::string(row.text(0)); });
      BOOST_TEST_REQUIRE(r.isOk(), r.status().msg());
      return out;
    };
    {
      Transaction tx(db);
      BOOST_TEST(db.relaxDurability().isOk());
      BOOST_TEST(db.exec(kInsert, {int64_t{1}, std::string_view("a"), 1.0, nullptr}).isOk());
      if (db.engine() == DbEngine::kPostgres) BOOST_TEST(setting() == "off");
      BOOST_TEST(tx.commit().isOk());
    }
    // For that transaction only; what it wrote is there for everyone.
    if (db.engine() == DbEngine::kPostgres) BOOST_TEST(setting() == "on");
    BOOST_TEST(count(*mustOpen(url)) == 1);
  });
}

BOOST_AUTO_TEST_CASE(a_lost_postgres_connection_is_a_503_then_reopened) {
  const std::string pg = envOr("EQ_TEST_PG_URL", "");
  if (pg.empty()) {
    BOOST_TEST(envOr("EQ_TEST_REQUIRE_PG", "0") != "1", "EQ_TEST_PG_URL is not set");
    return;
  }
  auto db = mustOpen(pg);
  auto admin = mustOpen(pg);
  int64_t pid = 0;
  BOOST_TEST_REQUIRE(
      db->exec(Sql{"SELECT pg_backend_pid()"}, {}, [&](const Row& r) { pid = r.int64(0); }).isOk());
  // The server ends the session, as a restart or a failover would (and
  // waits up to 5 s until it has ended).
  BOOST_TEST_REQUIRE(admin->exec(Sql{"SELECT pg_terminate_backend(?, 5000)"}, {pid}).isOk());
  const auto lost = db->exec(Sql{"SELECT 1"});
  BOOST_TEST(lost.status().code() == 503, lost.status().msg());
  int64_t one = 0;
  const auto again = db->exec(Sql{"SELECT 1"}, {}, [&](const Row& r) { one = r.int64(0); });
  BOOST_TEST(again.isOk(), again.status().msg());
  BOOST_TEST(one == 1);
  // Inside a transaction the connection is not silently reopened: the rest
  // would run in autocommit. The statement and the commit are 503s; after
  // the rollback the next statement reconnects.
  {
    BOOST_TEST_REQUIRE(db->exec(Sql{"SELECT pg_backend_pid()"}, {}, [&](const Row& r) {
                           pid = r.int64(0);
                         }).isOk());
    Transaction tx(*db);
    BOOST_TEST_REQUIRE(tx.status().isOk());
    BOOST_TEST_REQUIRE(admin->exec(Sql{"SELECT pg_terminate_backend(?, 5000)"}, {pid}).isOk());
    BOOST_TEST(db->exec(Sql{"SELECT 1"}).status().code() == 503);
    BOOST_TEST(db->exec(Sql{"SELECT 2"}).status().code() == 503);  // still no reconnect
    BOOST_TEST(tx.commit().code() == 503);
  }
  BOOST_TEST(db->exec(Sql{"SELECT 1"}).isOk());
  // The same with statements held for the next one (store::Db::queue): the
  // held BEGIN and the queued statement go down with the connection.
  {
    BOOST_TEST_REQUIRE(db->exec(Sql{"SELECT pg_backend_pid()"}, {}, [&](const Row& r) {
                           pid = r.int64(0);
                         }).isOk());
    Transaction tx(*db);
    BOOST_TEST_REQUIRE(tx.status().isOk());
    BOOST_TEST(db->queue(Sql{"SELECT ?::bigint"}, {int64_t{1}}).isOk());
    BOOST_TEST_REQUIRE(admin->exec(Sql{"SELECT pg_terminate_backend(?, 5000)"}, {pid}).isOk());
    BOOST_TEST(db->exec(Sql{"SELECT 1"}).status().code() == 503);
    BOOST_TEST(tx.commit().code() == 503);
  }
  BOOST_TEST(!db->inTransaction());
  BOOST_TEST(db->exec(Sql{"SELECT 1"}).isOk());
  // A server that cannot be reached is a 503 at open, naming why; a URL
  // libpq cannot read a 400.
  auto unreadable = Db::open(DbUrl::parse("postgresql://db/eq?nosuchoption=1").value());
  BOOST_TEST(unreadable.status().code() == 400, unreadable.status().msg());
  auto parsed = DbUrl::parse("postgresql://eq:x@127.0.0.1:1/eq?connect_timeout=2");
  auto refused = Db::open(parsed.value());
  BOOST_TEST(refused.status().code() == 503);
  BOOST_TEST(refused.status().msg().find("cannot connect to PostgreSQL") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

// A fresh SQLite database per test: the real Store with every migration
// applied, on a file of its own under /tmp, removed with its WAL files when
// the fixture goes. Unit fixtures that need a database derive from it, so
// their own members (a Dispatcher borrowing the store, say) are destroyed
// before the store.
#pragma once

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/timefmt.h"
#include "store/store.h"

namespace eq::test {

struct TempDb {
  std::string path;
  std::unique_ptr<Store> store;

  explicit TempDb(const std::string& name = "store") {
    std::string tmpl = "/tmp/eq-" + name + "-XXXXXX";
    ::close(mkstemp(tmpl.data()));
    path = tmpl;
    auto s = Store::open(path);
    BOOST_REQUIRE_MESSAGE(s.isOk(), "cannot open " << path << ": " << s.status().msg());
    store = std::move(s).value();
  }
  ~TempDb() {
    store.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  }
  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;

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
};

}  // namespace eq::test

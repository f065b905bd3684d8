#include "tools/eqctl_commands.h"

#include <rapidjson/document.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <sstream>

using namespace eq;

namespace {

struct Fixture {
  std::string path;
  std::unique_ptr<Store> store;
  Fixture() {
    char tmpl[] = "/tmp/eq-ctl-XXXXXX";
    ::close(mkstemp(tmpl));
    path = tmpl;
    store = std::move(Store::open(path)).value();
  }
  ~Fixture() {
    store.reset();
    for (const char* s : {"", "-wal", "-shm"}) std::remove((path + s).c_str());
  }
  int run(std::vector<std::string> args, std::string* out, std::string* err = nullptr) {
    std::ostringstream o, e;
    int rc = tools::runEqctl(*store, "production", args, o, e);
    *out = o.str();
    if (err != nullptr) *err = e.str();
    return rc;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(eqctl_commands)

BOOST_AUTO_TEST_CASE(create_json_prints_key_once_and_list_hides_it) {
  Fixture f;
  std::string out;
  BOOST_REQUIRE(f.run({"key", "create", "--name", "demo", "--tier", "pro", "--quota-fast", "7",
                       "--json"}, &out) == 0);
  rapidjson::Document d;
  d.Parse(out.c_str());
  BOOST_REQUIRE(d.IsObject());
  std::string key = d["api_key"].GetString();
  std::string key_id = d["key_id"].GetString();
  BOOST_TEST(std::string(d["tier"].GetString()) == "pro");
  BOOST_TEST(std::string(d["webhook_secret"].GetString()).rfind("whsec_", 0) == 0);

  std::string listing;
  BOOST_REQUIRE(f.run({"key", "list"}, &listing) == 0);
  BOOST_TEST(listing.find(key) == std::string::npos);
  BOOST_TEST(listing.find(key.substr(0, 16)) != std::string::npos);

  std::string quota;
  BOOST_REQUIRE(f.run({"quota", "show", key_id, "--json"}, &quota) == 0);
  BOOST_TEST(quota.find("\"fast\":7") != std::string::npos);
  BOOST_TEST(quota.find("\"standard\":100") != std::string::npos);

  BOOST_REQUIRE(f.run({"quota", "set", key_id, "--perfect", "3"}, &quota) == 0);
  BOOST_TEST(f.store->quota(f.store->accountOfKey(key_id).value()).value().remaining.perfect == 3);

  BOOST_REQUIRE(f.run({"key", "revoke", key_id}, &out) == 0);
  BOOST_TEST(!f.store->authenticate(key, "production").value().has_value());
}

BOOST_AUTO_TEST_CASE(bad_usage_is_reported) {
  Fixture f;
  std::string out, err;
  BOOST_TEST(f.run({"key", "create"}, &out, &err) == 2);
  BOOST_TEST(err.find("--name") != std::string::npos);
  BOOST_TEST(f.run({"key", "create", "--name", "x", "--tier", "gold"}, &out, &err) == 2);
  BOOST_TEST(f.run({"quota", "show", "key_missing"}, &out, &err) == 1);
  BOOST_TEST(f.run({"frobnicate", "now"}, &out, &err) == 2);
}

BOOST_AUTO_TEST_SUITE_END()

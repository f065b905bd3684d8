#include "common/crypto.h"

#include <boost/test/unit_test.hpp>

#include "common/ids.h"

using namespace eq;

BOOST_AUTO_TEST_SUITE(crypto_primitives)

// RFC 4231 test case 2 and the FIPS 180-2 "abc" vector pin the primitives.
BOOST_AUTO_TEST_CASE(hmac_sha256_matches_rfc4231) {
  BOOST_TEST(crypto::hex(crypto::hmacSha256("Jefe", "what do ya want for nothing?")) ==
             "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

BOOST_AUTO_TEST_CASE(sha256_matches_fips_vector) {
  BOOST_TEST(crypto::hex(crypto::sha256("abc")) ==
             "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

BOOST_AUTO_TEST_CASE(base64_round_trips) {
  std::string raw = crypto::randomBytes(33);
  std::string back;
  BOOST_TEST(crypto::base64Decode(crypto::base64(raw), &back));
  BOOST_TEST(back == raw);
  BOOST_TEST(crypto::base64("f") == "Zg==");
  BOOST_TEST(crypto::base64url(std::string("\xfb\xff", 2)) == "-_8");
  BOOST_TEST(!crypto::base64Decode("abc", &back));
}

BOOST_AUTO_TEST_CASE(constant_time_equal) {
  BOOST_TEST(crypto::constantTimeEqual("abc", "abc"));
  BOOST_TEST(!crypto::constantTimeEqual("abc", "abd"));
  BOOST_TEST(!crypto::constantTimeEqual("abc", "abcd"));
}

BOOST_AUTO_TEST_CASE(task_ids_are_time_ordered_and_recognised) {
  std::string a = ids::timeOrdered("tsk_", 1'700'000'000'000);
  std::string b = ids::timeOrdered("tsk_", 1'700'000'000'001);
  BOOST_TEST(a.size() == 30u);
  BOOST_TEST(a < b);
  BOOST_TEST(ids::looksLike(a, "tsk_"));
  BOOST_TEST(!ids::looksLike(a, "req_"));
  BOOST_TEST(!ids::looksLike("tsk_../../etc/passwd", "tsk_"));
  BOOST_TEST(ids::newTaskId() != ids::newTaskId());
}

BOOST_AUTO_TEST_SUITE_END()

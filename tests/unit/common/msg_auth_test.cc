// The signatures our processes put on jobs, sync results and task events
// (common/msg_auth.h): what verifies and what does not.
#include "common/msg_auth.h"

#include <boost/test/unit_test.hpp>
#include <cctype>
#include <ostream>

#include "common/crypto.h"

using namespace eq;
using msg::SignedKind;
using msg::Verdict;

namespace {

const std::string kKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kEvent =
    R"({"v":1,"event":"task.succeeded","task_id":"tsk_1","request_id":"req_1","mode":"fast"})";

}  // namespace

// Boost.Test prints the operands of a failed comparison.
namespace eq::msg {
std::ostream& operator<<(std::ostream& os, Verdict v) { return os << verdictName(v); }
}  // namespace eq::msg

BOOST_AUTO_TEST_SUITE(message_authentication)

BOOST_AUTO_TEST_CASE(a_signed_message_verifies) {
  std::string sig = msg::signMessage(kKey, SignedKind::kTaskEvent, "", kEvent);
  BOOST_TEST(sig.size() == 64u);  // HMAC-SHA256 in hex
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kTaskEvent, "", kEvent, sig) == Verdict::kValid);
}

// Pins the format: another implementation (an operator's script, a future
// client in another language) must compute exactly this.
BOOST_AUTO_TEST_CASE(the_signed_bytes_are_documented_ones) {
  std::string expected = crypto::hex(
      crypto::hmacSha256(kKey, "eq-msg-v1\nsync-result\n7:req_abc\n{\"ok\":true}"));
  BOOST_TEST(msg::signMessage(kKey, SignedKind::kSyncResult, "req_abc", "{\"ok\":true}") ==
             expected);
}

BOOST_AUTO_TEST_CASE(a_missing_signature_is_unsigned) {
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kTaskEvent, "", kEvent, "") ==
             Verdict::kUnsigned);
}

BOOST_AUTO_TEST_CASE(another_key_does_not_verify) {
  std::string forged = msg::signMessage("eq-reply-some-other-key-of-32-chars!", SignedKind::kTaskEvent,
                                        "", kEvent);
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kTaskEvent, "", kEvent, forged) ==
             Verdict::kBadSignature);
}

BOOST_AUTO_TEST_CASE(an_altered_body_does_not_verify) {
  std::string sig = msg::signMessage(kKey, SignedKind::kTaskEvent, "", kEvent);
  std::string altered = kEvent;
  altered.replace(altered.find("tsk_1"), 5, "tsk_2");
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kTaskEvent, "", altered, sig) ==
             Verdict::kBadSignature);
  // One byte more (trailing whitespace a JSON reader would ignore) is
  // another body too.
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kTaskEvent, "", kEvent + " ", sig) ==
             Verdict::kBadSignature);
}

BOOST_AUTO_TEST_CASE(a_signature_of_another_kind_does_not_verify) {
  std::string as_job = msg::signMessage(kKey, SignedKind::kJob, "", kEvent);
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kTaskEvent, "", kEvent, as_job) ==
             Verdict::kBadSignature);
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kSyncResult, "", kEvent, as_job) ==
             Verdict::kBadSignature);
}

BOOST_AUTO_TEST_CASE(a_sync_result_is_bound_to_its_correlation_id) {
  std::string body = R"({"ok":true,"data":{}})";
  std::string sig = msg::signMessage(kKey, SignedKind::kSyncResult, "req_a", body);
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kSyncResult, "req_a", body, sig) ==
             Verdict::kValid);
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kSyncResult, "req_b", body, sig) ==
             Verdict::kBadSignature);
  // The context's length is part of what is signed: moving bytes between
  // the correlation id and the body makes another message.
  std::string shifted = msg::signMessage(kKey, SignedKind::kSyncResult, "req_a\n", body);
  BOOST_TEST(shifted != sig);
}

BOOST_AUTO_TEST_CASE(garbage_and_upper_case_do_not_verify) {
  std::string sig = msg::signMessage(kKey, SignedKind::kJob, "", kEvent);
  std::string upper = sig;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kJob, "", kEvent, "sha256=" + sig) ==
             Verdict::kBadSignature);
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kJob, "", kEvent, sig.substr(0, 63)) ==
             Verdict::kBadSignature);
  BOOST_TEST(msg::verifyMessage(kKey, SignedKind::kJob, "", kEvent, upper) ==
             Verdict::kBadSignature);
}

// No key must never mean "anything goes": a signature made with an empty
// key is still refused.
BOOST_AUTO_TEST_CASE(an_empty_key_verifies_nothing) {
  std::string sig = msg::signMessage("", SignedKind::kJob, "", kEvent);
  BOOST_TEST(msg::verifyMessage("", SignedKind::kJob, "", kEvent, sig) == Verdict::kBadSignature);
}

BOOST_AUTO_TEST_CASE(verdicts_have_metric_label_names) {
  BOOST_TEST(std::string(msg::verdictName(Verdict::kUnsigned)) == "unsigned");
  BOOST_TEST(std::string(msg::verdictName(Verdict::kBadSignature)) == "bad_signature");
}

BOOST_AUTO_TEST_SUITE_END()

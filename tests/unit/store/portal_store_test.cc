// The developer center's records (store/portal.cc) and password
// hashing (common/password.h), on each engine (tests/unit/temp_db.h).
#include <boost/test/unit_test.hpp>
#include <optional>

#include "common/password.h"
#include "common/timefmt.h"
#include "store/store.h"
#include "tests/unit/temp_db.h"

using namespace eq;

namespace {

int64_t sum(const std::vector<UsageRow>& rows, const std::string& mode, int64_t UsageRow::*field) {
  int64_t n = 0;
  for (const UsageRow& r : rows) {
    if (r.mode == mode) n += r.*field;
  }
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(portal_store)

BOOST_AUTO_TEST_CASE(password_hash_verifies_only_the_same_password) {
  std::string h = password::hash("correct horse battery");
  BOOST_TEST(h.rfind("scrypt$15$8$1$", 0) == 0);
  BOOST_TEST(password::verify("correct horse battery", h));
  BOOST_TEST(!password::verify("correct horse batterY", h));
  BOOST_TEST(!password::verify("", h));
  // A fresh salt every time: the same password never hashes the same.
  BOOST_TEST(password::hash("correct horse battery") != h);
  // Malformed or tampered rows never match, and never make us allocate more
  // than the bound allows.
  for (const std::string& bad :
       {std::string(""), std::string("scrypt$15$8$1$AAAA"), std::string("scrypt$30$8$1$AAAA$AAAA"),
        std::string("bcrypt$10$x$y$z$w"), h.substr(0, h.size() - 4)}) {
    BOOST_TEST(!password::verify("correct horse battery", bad), bad);
  }
  BOOST_TEST(!password::acceptable("short"));
  BOOST_TEST(!password::acceptable("九个字符的密码啊啊"));  // 9 code points, 27 bytes
  BOOST_TEST(password::acceptable("十个字符的密码啊啊啊"));
}

// docs/contract.md §9: an unknown email and a wrong password get the same answer
// in the same time. Sign-in spends the unknown email's time in
// burnVerifyTime(), which is verify() against decoyHash(); what a verify()
// costs is a function of the parameters it derives with, so the decoy must
// carry exactly those of a hash made now, and be well-formed enough that
// verify() derives rather than refusing it early. Checked by parameters,
// not by a stopwatch, so the test cannot depend on the machine's speed.
BOOST_AUTO_TEST_CASE(an_unknown_email_costs_the_same_scrypt_work_as_a_wrong_password) {
  std::string real = password::hash("correct horse battery");
  std::optional<password::Params> want = password::paramsOf(real);
  BOOST_REQUIRE(want.has_value());
  BOOST_TEST(want->log_n == 15);
  BOOST_TEST(want->r == 8u);
  BOOST_TEST(want->p == 1u);
  std::string decoy = password::decoyHash();
  std::optional<password::Params> burned = password::paramsOf(decoy);
  BOOST_REQUIRE_MESSAGE(burned.has_value(), "verify() would refuse the decoy without deriving");
  BOOST_TEST((*burned == *want));
  // No password opens the decoy, the empty one and one of its own text included.
  for (const char* guess : {"correct horse battery", "", "AAAAAAAAAAAAAAAAAAAAAA=="}) {
    BOOST_TEST(!password::verify(guess, decoy), guess);
  }
  // The early refusals the decoy must not fall into have no parameters.
  for (const std::string& bad :
       {std::string(""), std::string("scrypt$15$8$1$AAAA"), std::string("scrypt$21$8$1$AAAA$AAAA"),
        real.substr(0, real.size() - 4)}) {
    BOOST_TEST(!password::paramsOf(bad).has_value(), bad);
  }
}

EQ_STORE_TEST_CASE(an_invitation_is_used_once_and_makes_the_account) {
  test::TempDb db("portal");
  int64_t now = nowMs();
  Result<std::string> token =
      db.store->createPortalLink("invite", "Ann@Example.com", "pro", "", now);
  BOOST_REQUIRE(token.isOk());
  auto link = db.store->portalLink(token.value(), now);
  BOOST_REQUIRE(link.isOk() && link.value().has_value());
  BOOST_TEST(link.value()->email == "ann@example.com");  // lower-cased
  Result<Person> p = db.store->usePortalLink(token.value(), "scrypt$hash", now);
  BOOST_REQUIRE(p.isOk());
  auto q = db.store->quota(p.value().account_id);
  BOOST_REQUIRE(q.isOk());
  BOOST_TEST(q.value().tier == "pro");
  BOOST_TEST(q.value().remaining.fast == 100);
  BOOST_TEST(q.value().expire_at_ms > now + 29LL * 86'400'000);
  // Used up: a second use and a read both fail.
  BOOST_TEST(db.store->usePortalLink(token.value(), "scrypt$other", now).status().code() == 404);
  BOOST_TEST(!db.store->portalLink(token.value(), now).value().has_value());
  // Expired links are refused too.
  Result<std::string> late =
      db.store->createPortalLink("invite", "bob@example.com", "free", "", now);
  BOOST_TEST(!db.store->portalLink(late.value(), now + Store::kLinkTtlMs + 1).value().has_value());
  BOOST_TEST(
      db.store->usePortalLink(late.value(), "h", now + Store::kLinkTtlMs + 1).status().code() ==
      404);
}

EQ_STORE_TEST_CASE(an_invitation_can_attach_an_existing_account) {
  test::TempDb db("portal");
  CreatedKey k = db.newKey();
  int64_t now = nowMs();
  auto token = db.store->createPortalLink("invite", "ops@example.com", "free", k.account_id, now);
  Result<Person> p = db.store->usePortalLink(token.value(), "h", now);
  BOOST_REQUIRE(p.isOk());
  BOOST_TEST(p.value().account_id == k.account_id);
  auto keys = db.store->accountKeys(k.account_id, now);
  BOOST_REQUIRE(keys.isOk());
  BOOST_TEST(keys.value().size() == 1u);
  BOOST_TEST(keys.value()[0].name == "test");
}

EQ_STORE_TEST_CASE(sessions_end_on_idleness_age_signout_and_password_reset) {
  test::TempDb db("portal");
  int64_t now = nowMs();
  Result<Person> p = db.store->registerPerson("c@example.com", "h", now);
  BOOST_REQUIRE(p.isOk());
  BOOST_TEST(db.store->registerPerson("C@example.com", "h", now).status().code() == 409);
  auto s1 = db.store->createSession(p.value().person_id, now).value();
  auto s2 = db.store->createSession(p.value().person_id, now).value();
  BOOST_TEST(s1.session_id != s2.session_id);
  BOOST_TEST(db.store->session(s1.session_id, now).value()->csrf == s1.csrf);
  // Idle for 12 h: gone. Seen within 12 h: alive, and seen again moves it.
  BOOST_TEST(
      !db.store->session(s1.session_id, now + Store::kSessionIdleMs + 1).value().has_value());
  BOOST_TEST(
      db.store->session(s2.session_id, now + Store::kSessionIdleMs - 1000).value().has_value());
  // Even when seen every hour, 7 days is the end.
  int64_t t = now;
  while (t + 3'600'000 < now + Store::kSessionMaxMs) {
    t += 3'600'000;
    std::optional<PortalSession> seen = db.store->session(s2.session_id, t).value();
    BOOST_REQUIRE(seen.has_value());
    BOOST_REQUIRE(db.store->touchSession(s2.session_id, *seen, t).isOk());
  }
  BOOST_TEST(!db.store->session(s2.session_id, now + Store::kSessionMaxMs).value().has_value());
  // Sign-out ends its own session.
  auto a = db.store->createSession(p.value().person_id, now).value();
  auto b = db.store->createSession(p.value().person_id, now).value();
  BOOST_REQUIRE(db.store->endSession(a.session_id).isOk());
  BOOST_TEST(!db.store->session(a.session_id, now).value().has_value());
  BOOST_TEST(db.store->session(b.session_id, now).value().has_value());
  // A reset link ends every session of the person.
  auto c = db.store->createSession(p.value().person_id, now).value();
  auto reset = db.store->createPortalLink("reset", "c@example.com", "free", "", now);
  BOOST_REQUIRE(db.store->usePortalLink(reset.value(), "h2", now).isOk());
  BOOST_TEST(!db.store->session(c.session_id, now).value().has_value());
  BOOST_TEST(db.store->personByEmail("c@example.com").value()->password_hash == "h2");
  // No reset link for someone who does not exist.
  BOOST_TEST(
      db.store->createPortalLink("reset", "nobody@example.com", "free", "", now).status().code() ==
      404);
}

EQ_STORE_TEST_CASE(disabling_a_person_ends_sessions_and_revokes_keys) {
  test::TempDb db("portal");
  CreatedKey k = db.newKey();
  int64_t now = nowMs();
  auto token = db.store->createPortalLink("invite", "d@example.com", "free", k.account_id, now);
  Result<Person> p = db.store->usePortalLink(token.value(), "h", now);
  auto s = db.store->createSession(p.value().person_id, now).value();
  BOOST_REQUIRE(db.store->disablePerson("d@example.com", now).isOk());
  BOOST_TEST(!db.store->session(s.session_id, now).value().has_value());
  BOOST_TEST(!db.store->authenticate(k.api_key, "production", now).value().has_value());
}

// Issue 25 (4): a password change gives the session that asked a new id and
// CSRF token (a copied cookie or token does not outlive it), ends every
// other session and revokes the person's outstanding links.
EQ_STORE_TEST_CASE(a_password_change_renews_the_session_and_revokes_sessions_and_links) {
  test::TempDb db("portal");
  int64_t now = nowMs();
  Result<Person> p = db.store->registerPerson("f@example.com", "h1", now);
  BOOST_REQUIRE(p.isOk());
  auto mine = db.store->createSession(p.value().person_id, now).value();
  auto other = db.store->createSession(p.value().person_id, now).value();
  auto reset = db.store->createPortalLink("reset", "f@example.com", "free", "", now);
  BOOST_REQUIRE(reset.isOk());

  Result<NewSession> renewed = db.store->changePassword(p.value().person_id, "h2", now + 1);
  BOOST_REQUIRE(renewed.isOk());
  BOOST_TEST(renewed.value().session_id != mine.session_id);
  BOOST_TEST(renewed.value().csrf != mine.csrf);
  BOOST_TEST(!db.store->session(mine.session_id, now + 2).value().has_value());
  BOOST_TEST(!db.store->session(other.session_id, now + 2).value().has_value());
  auto live = db.store->session(renewed.value().session_id, now + 2).value();
  BOOST_REQUIRE(live.has_value());
  BOOST_TEST(live->csrf == renewed.value().csrf);
  BOOST_TEST(db.store->personByEmail("f@example.com").value()->password_hash == "h2");
  // The reset link made before the change is revoked: it cannot undo it.
  BOOST_TEST(!db.store->portalLink(reset.value(), now + 2).value().has_value());
  BOOST_TEST(db.store->usePortalLink(reset.value(), "h3", now + 2).status().code() == 404);
  BOOST_TEST(db.store->personByEmail("f@example.com").value()->password_hash == "h2");
}

// Issue 25 (4): using one link revokes the person's other links, resets
// and invitations alike.
EQ_STORE_TEST_CASE(using_one_link_revokes_the_others) {
  test::TempDb db("portal");
  int64_t now = nowMs();
  auto first = db.store->createPortalLink("invite", "g@example.com", "free", "", now);
  auto second = db.store->createPortalLink("invite", "g@example.com", "pro", "", now);
  BOOST_REQUIRE(first.isOk() && second.isOk());
  BOOST_REQUIRE(db.store->usePortalLink(first.value(), "h1", now).isOk());
  BOOST_TEST(!db.store->portalLink(second.value(), now).value().has_value());
  BOOST_TEST(db.store->usePortalLink(second.value(), "h2", now).status().code() == 404);

  auto r1 = db.store->createPortalLink("reset", "g@example.com", "free", "", now);
  auto r2 = db.store->createPortalLink("reset", "g@example.com", "free", "", now);
  BOOST_REQUIRE(db.store->usePortalLink(r2.value(), "h3", now).isOk());
  BOOST_TEST(db.store->usePortalLink(r1.value(), "h4", now).status().code() == 404);
  BOOST_TEST(db.store->personByEmail("g@example.com").value()->password_hash == "h3");
}

// Issue 25 (4): an invitation is for someone new. For an email (or an
// account) that has a person it is refused when made, and when used if the
// person came after it; a reset link sets the password and nothing else.
EQ_STORE_TEST_CASE(
    an_invitation_to_someone_with_an_account_is_refused_and_a_reset_changes_only_the_password) {
  test::TempDb db("portal");
  CreatedKey k = db.newKey();
  int64_t now = nowMs();
  auto invite = db.store->createPortalLink("invite", "h@example.com", "free", k.account_id, now);
  BOOST_REQUIRE(db.store->usePortalLink(invite.value(), "h1", now).isOk());
  std::string tier_before = db.store->quota(k.account_id).value().tier;

  Result<std::string> again =
      db.store->createPortalLink("invite", "H@example.com", "ultra", "", now);
  BOOST_TEST(again.status().code() == 409);
  BOOST_TEST(again.status().msg().find("reset-password h@example.com") != std::string::npos,
             again.status().msg());
  Result<std::string> same_account =
      db.store->createPortalLink("invite", "other@example.com", "free", k.account_id, now);
  BOOST_TEST(same_account.status().code() == 409);
  BOOST_TEST(same_account.status().msg().find("reset-password") != std::string::npos);

  // An invitation made before the person registered is refused when used,
  // and changes nothing.
  auto early = db.store->createPortalLink("invite", "i@example.com", "ultra", "", now);
  BOOST_REQUIRE(early.isOk());
  Result<Person> i = db.store->registerPerson("i@example.com", "mine", now);
  BOOST_REQUIRE(i.isOk());
  BOOST_TEST(db.store->usablePortalLink(early.value(), now).status().code() == 409);
  BOOST_TEST(db.store->usePortalLink(early.value(), "theirs", now).status().code() == 409);
  Person after = *db.store->personByEmail("i@example.com").value();
  BOOST_TEST(after.password_hash == "mine");
  BOOST_TEST(after.account_id == i.value().account_id);
  BOOST_TEST(db.store->quota(after.account_id).value().tier == "free");

  // A reset: the password, and the account, its tier and its key untouched.
  auto reset = db.store->createPortalLink("reset", "h@example.com", "ultra", "", now);
  Result<Person> reset_done = db.store->usePortalLink(reset.value(), "h2", now);
  BOOST_REQUIRE(reset_done.isOk());
  BOOST_TEST(reset_done.value().account_id == k.account_id);
  BOOST_TEST(db.store->quota(k.account_id).value().tier == tier_before);
  BOOST_TEST(db.store->authenticate(k.api_key, "production", now).value().has_value());
}

// Issue 25 (8): accounts.disabled_at counts wherever a disabled person
// does: sessions (and with them the playground), sign-in (the person reads
// as disabled), and links. Set here on its own, as a later writer or an
// operator's SQL might, to show it is read.
EQ_STORE_TEST_CASE(a_disabled_account_is_refused_wherever_a_disabled_person_is) {
  test::TempDb db("portal");
  CreatedKey k = db.newKey();
  int64_t now = nowMs();
  auto invite = db.store->createPortalLink("invite", "j@example.com", "free", k.account_id, now);
  Result<Person> p = db.store->usePortalLink(invite.value(), "h", now);
  BOOST_REQUIRE(p.isOk());
  auto s = db.store->createSession(p.value().person_id, now).value();
  auto reset = db.store->createPortalLink("reset", "j@example.com", "free", "", now);
  BOOST_REQUIRE(reset.isOk());
  BOOST_REQUIRE(db.script("UPDATE accounts SET disabled_at = " + std::to_string(now) +
                          " WHERE id = '" + k.account_id + "'")
                    .isOk());
  BOOST_TEST(!db.store->session(s.session_id, now).value().has_value());
  BOOST_TEST(db.store->personByEmail("j@example.com").value()->status == "disabled");
  BOOST_TEST(db.store->person(p.value().person_id).value()->status == "disabled");
  BOOST_TEST(db.store->usablePortalLink(reset.value(), now).status().code() == 403);
  BOOST_TEST(db.store->usePortalLink(reset.value(), "h2", now).status().code() == 403);
  BOOST_TEST(
      db.store->createPortalLink("reset", "j@example.com", "free", "", now).status().code() == 409);
  // A key of a disabled account cannot bring a new person to it either.
  BOOST_TEST(db.store->createPortalLink("invite", "new@example.com", "free", k.account_id, now)
                 .status()
                 .code() == 403);
}

EQ_STORE_TEST_CASE(signin_failures_limit_per_scope_within_the_window) {
  test::TempDb db("portal");
  int64_t now = nowMs();
  for (int i = 0; i < Store::kSigninMaxFailures; ++i) {
    BOOST_REQUIRE(db.store->recordSigninFailure("email:e@example.com", now + i * 1000).isOk());
  }
  int64_t last = now + (Store::kSigninMaxFailures - 1) * 1000;
  BOOST_TEST(db.store->signinFailures("email:e@example.com", last).value() == 10);
  BOOST_TEST(db.store->signinFailures("addr:7f000001", last).value() == 0);
  // The limit lifts when the oldest failure leaves the 15-minute window.
  BOOST_TEST(db.store->signinRetryAt("email:e@example.com", last).value() ==
             now + Store::kSigninWindowMs);
  BOOST_TEST(
      db.store->signinFailures("email:e@example.com", now + Store::kSigninWindowMs).value() == 9);
}

// Attempts counted before the password is checked see each other: ten at
// once cannot all pass a limit of ten (the attack on the developer center
// sent 50 concurrent sign-ins through it), and a right password takes its
// count back.
EQ_STORE_TEST_CASE(password_attempts_are_counted_before_the_check) {
  test::TempDb db("portal");
  int64_t now = nowMs();
  const std::vector<std::string> scopes = {"email:a@example.com", "addr:7f000001"};
  std::vector<Store::PasswordAttempt> begun;
  for (int i = 0; i < Store::kSigninMaxFailures + 3; ++i) {
    Result<Store::PasswordAttempt> a = db.store->beginPasswordAttempt(scopes, now + i);
    BOOST_REQUIRE(a.isOk());
    begun.push_back(a.value());
  }
  for (int i = 0; i < Store::kSigninMaxFailures; ++i) {
    BOOST_TEST(begun[i].retry_at_ms == 0);
    BOOST_TEST(begun[i].counted.size() == 2u);  // one row per scope
  }
  for (int i = Store::kSigninMaxFailures; i < Store::kSigninMaxFailures + 3; ++i) {
    BOOST_TEST(begun[i].retry_at_ms == now + Store::kSigninWindowMs);  // the first one's
    BOOST_TEST(begun[i].counted.empty());
  }
  BOOST_TEST(db.store->signinFailures("addr:7f000001", now + 20).value() == 10);
  // The last counted attempt had the right password: its rows go, and the
  // next attempt is allowed again.
  BOOST_REQUIRE(
      db.store->forgetSigninFailures(begun[Store::kSigninMaxFailures - 1].counted).isOk());
  BOOST_TEST(db.store->signinFailures("email:a@example.com", now + 20).value() == 9);
  BOOST_TEST(db.store->beginPasswordAttempt(scopes, now + 21).value().retry_at_ms == 0);
  // One scope at its limit is enough to refuse.
  BOOST_TEST(db.store->beginPasswordAttempt({"email:other@example.com", "addr:7f000001"}, now + 22)
                 .value()
                 .retry_at_ms > 0);
}

EQ_STORE_TEST_CASE(usage_agrees_with_the_quota_through_charges_and_refunds) {
  test::TempDb db("portal");
  CreatedKey k = db.newKey(50);
  int64_t now = nowMs();
  for (int i = 0; i < 7; ++i) {
    BOOST_REQUIRE(
        (db.store->chargeQuota(k.account_id, "fast", now).value() == ChargeOutcome::kCharged));
  }
  BOOST_REQUIRE(db.store->chargeQuota(k.account_id, "perfect", now).isOk());
  BOOST_REQUIRE(db.store->refundQuota(k.account_id, "fast", now, now).isOk());
  BOOST_REQUIRE(
      db.store->refundQuota(k.account_id, "fast", now, now + 3'600'000).isOk());  // next hour
  BOOST_REQUIRE(db.store->recordTokens(k.account_id, "fast", 42, now).isOk());
  auto rows = db.store->usage(k.account_id, now - 86'400'000);
  BOOST_REQUIRE(rows.isOk());
  int64_t used_fast = 50 - db.store->quota(k.account_id).value().remaining.fast;
  BOOST_TEST(sum(rows.value(), "fast", &UsageRow::calls) -
                 sum(rows.value(), "fast", &UsageRow::refunded) ==
             used_fast);
  BOOST_TEST(used_fast == 5);
  BOOST_TEST(sum(rows.value(), "perfect", &UsageRow::calls) == 1);
  BOOST_TEST(sum(rows.value(), "fast", &UsageRow::tokens) == 42);
  // A refused charge (exhausted) is not a call.
  CreatedKey empty = db.newKey(0);
  BOOST_TEST(
      (db.store->chargeQuota(empty.account_id, "fast", now).value() == ChargeOutcome::kExhausted));
  BOOST_TEST(db.store->usage(empty.account_id, 0).value().empty());
}

EQ_STORE_TEST_CASE(a_failed_task_refunds_into_the_usage_record_and_a_success_adds_tokens) {
  test::TempDb db("portal");
  CreatedKey k = db.newKey();
  int64_t now = nowMs();
  for (const char* id : {"tsk_a", "tsk_b"}) {
    BOOST_REQUIRE(db.store->chargeQuota(k.account_id, "standard", now).isOk());
    TaskRecord t;
    t.task_id = id;
    t.account_id = k.account_id;
    t.key_id = k.key_id;
    t.request_id = std::string("req_") + id;
    t.mode = "standard";
    t.created_at = now;
    BOOST_REQUIRE(db.store->createTask(t).isOk());
  }
  BOOST_REQUIRE(
      db.store->markTaskSucceeded("tsk_a", R"({"replies":[],"tokens_used":17})", now).value());
  BOOST_REQUIRE(db.store->markTaskFailed("tsk_b", 500, "boom", now).value());
  // Twice is once: the second transition changes nothing.
  BOOST_TEST(!db.store->markTaskSucceeded("tsk_a", R"({"tokens_used":17})", now).value());
  auto rows = db.store->usage(k.account_id, now - 86'400'000).value();
  BOOST_TEST(sum(rows, "standard", &UsageRow::calls) == 2);
  BOOST_TEST(sum(rows, "standard", &UsageRow::refunded) == 1);
  BOOST_TEST(sum(rows, "standard", &UsageRow::tokens) == 17);
  BOOST_TEST(db.store->quota(k.account_id).value().remaining.standard == 99);
}

EQ_STORE_TEST_CASE(a_rotated_secret_keeps_signing_for_its_overlap) {
  test::TempDb db("portal");
  CreatedKey k = db.newKey();
  int64_t now = nowMs();
  auto before = db.store->signingSecrets(k.account_id, now).value();
  BOOST_TEST(before.first == k.webhook_secret);
  BOOST_TEST(before.second.empty());
  Result<std::string> fresh = db.store->rotateWebhookSecret(k.account_id, now);
  BOOST_REQUIRE(fresh.isOk());
  auto during = db.store->signingSecrets(k.account_id, now + 1000).value();
  BOOST_TEST(during.first == fresh.value());
  BOOST_TEST(during.second == k.webhook_secret);
  auto after = db.store->signingSecrets(k.account_id, now + Store::kSecretOverlapMs + 1).value();
  BOOST_TEST(after.first == fresh.value());
  BOOST_TEST(after.second.empty());
}

EQ_STORE_TEST_CASE(test_deliveries_belong_to_the_account_and_are_purged_when_old) {
  test::TempDb db("portal");
  CreatedKey k = db.newKey();
  CreatedKey other = db.newKey();
  int64_t now = nowMs();
  auto d = db.store->createTestDelivery(k.account_id, "http://127.0.0.1:9/hook", now);
  BOOST_REQUIRE(d.isOk());
  BOOST_TEST(d.value().task_id.empty());
  BOOST_TEST(d.value().event == "test");
  BOOST_TEST(db.store->accountDeliveries(k.account_id, std::nullopt, 10).value().size() == 1u);
  BOOST_TEST(db.store->accountDeliveries(other.account_id, std::nullopt, 10).value().empty());
  // Pending deliveries are never purged; finished old ones are.
  BOOST_REQUIRE(db.store->purgePortalBefore(now + 1, now, 100).isOk());
  BOOST_TEST(db.store->accountDeliveries(k.account_id, std::nullopt, 10).value().size() == 1u);
  DeliveryAttempt a{now, 200, 5, "", 1};
  BOOST_REQUIRE(
      db.store->finishAttempt(d.value().delivery_id, a, DeliveryStatus::kDelivered, 0).value());
  BOOST_REQUIRE(db.store->purgePortalBefore(now + 1, now, 100).isOk());
  BOOST_TEST(db.store->accountDeliveries(k.account_id, std::nullopt, 10).value().empty());
}

EQ_STORE_TEST_CASE(one_test_event_at_a_time_and_a_bound_on_keys) {
  test::TempDb db("portal");
  CreatedKey k = db.newKey();
  int64_t now = nowMs();
  auto first = db.store->createTestDelivery(k.account_id, "http://127.0.0.1:9/hook", now);
  BOOST_REQUIRE(first.isOk());
  BOOST_TEST(
      db.store->createTestDelivery(k.account_id, "http://127.0.0.1:9/hook", now).status().code() ==
      409);
  DeliveryAttempt a{now, 500, 5, "", 1};
  BOOST_REQUIRE(
      db.store->finishAttempt(first.value().delivery_id, a, DeliveryStatus::kFailed, 0).value());
  BOOST_TEST(db.store->createTestDelivery(k.account_id, "http://127.0.0.1:9/hook", now).isOk());

  for (int64_t i = 1; i < Store::kMaxActiveKeys; ++i) {  // newKey made the first
    BOOST_REQUIRE(
        db.store->createAccountKey(k.account_id, "k" + std::to_string(i), "production", now)
            .isOk());
  }
  Result<CreatedKey> over = db.store->createAccountKey(k.account_id, "one more", "production", now);
  BOOST_TEST(over.status().code() == 409);
  BOOST_REQUIRE(db.store->revokeKey(k.key_id).isOk());
  BOOST_TEST(db.store->createAccountKey(k.account_id, "one more", "production", now).isOk());
}

BOOST_AUTO_TEST_SUITE_END()

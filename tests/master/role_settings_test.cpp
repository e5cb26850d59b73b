// Run-time role settings: the stored form, the file store, the
// precedence of stored settings over flags, and RoleSettingsKeeper's
// store-then-apply path, on a fake clock and an in-memory store.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "base/clock.h"
#include "master/master.h"
#include "master/role_settings.h"
#include "master/role_store.h"
#include "tests/common/test_util.h"
#include "tests/master/fake_role_store.h"
#include "tests/master/master_fixture.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::FakeRoleStore;
using testing::RecordingOutbox;
using testing::runUntil;

Resources res(const char* text) { return *Resources::parse(text); }

// --- the stored form ---------------------------------------------------

TEST(RoleSettingsCodec, RoundTripsExactly) {
  RoleSettings in;
  in["batch"] = RoleSetting{2.5, res("cpus:10;mem:1048576")};
  in[""] = RoleSetting{0.125, std::nullopt};              // the default role
  in["web%1"] = RoleSetting{std::nullopt, Resources()};   // quota removed
  in["tiny"] = RoleSetting{1.0 / 3, res("cpus:0.001;gpus:1")};
  std::string text = encodeRoleSettings(in, 42);
  EXPECT_NE(text.find("role batch weight=2.5 quota=cpus:10;mem:1048576\n"), std::string::npos) << text;
  EXPECT_NE(text.find("role web%251 quota=none\n"), std::string::npos) << text;
  EXPECT_NE(text.find("role % weight=0.125\n"), std::string::npos) << text;
  auto out = decodeRoleSettings(text);
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_EQ(out->epoch, 42u);
  EXPECT_EQ(out->settings, in);
  EXPECT_EQ(out->settings["tiny"].quota->scalarMillis("cpus"), 1);
}

TEST(RoleSettingsCodec, RefusesAnythingElseWithTheLineThatIsWrong) {
  const std::string head = "allot-role-settings 1\nepoch 7\n";
  struct Case {
    std::string text;
    std::string says;
  };
  std::vector<Case> cases = {
      {"", "empty"},
      {"allot-role-settings 2\nepoch 1\n", "line 1"},
      {"allot-role-settings 1\n", "no epoch"},
      {head + "role a weight=1", "no final newline"},
      {head + "role a weight=0\n", "line 3: weight"},
      {head + "role a weight=nan\n", "weight"},
      {head + "role a weight=inf\n", "weight"},
      {head + "role a weight=1e7\n", "weight"},
      {head + "role a weight=2x\n", "weight"},
      {head + "role a\n", "sets nothing"},
      {head + "role a weight=1 weight=2\n", "unexpected"},
      {head + "role a colour=red\n", "unexpected"},
      {head + "role a weight=1\nrole a quota=cpus:1\n", "line 4: role 'a' appears twice"},
      {head + "role a%3Ab weight=1\n", "role name"},
      {head + "role a%4 weight=1\n", "escape"},
      {head + "role " + std::string(65, 'r') + " weight=1\n", "bytes"},
      {head + "role a quota=ports:[1-2]\n", "scalars only"},
      {head + "role a quota=cpus:x\n", "quota"},
      {head + "role a quota=\n", "quota"},
      {head + "rule a weight=1\n", "unexpected 'rule'"},
      {head + "\n", "empty line"},
      {"allot-role-settings 1\nepoch -1\n", "bad epoch"},
      {std::string("\x00\xff\x13garbage", 10), "line 1"},
  };
  for (const Case& c : cases) {
    auto out = decodeRoleSettings(c.text);
    ASSERT_FALSE(out) << "accepted: " << c.text;
    EXPECT_NE(out.error().message.find(c.says), std::string::npos)
        << c.text << " -> " << out.error().message;
  }
}

TEST(RoleSettingsCodec, RefusesOversizedTextAndTooManyRoles) {
  std::string big = "allot-role-settings 1\nepoch 1\n";
  big += std::string(kRoleSettingsBytesMax, '#') + "\n";
  auto oversized = decodeRoleSettings(big);
  ASSERT_FALSE(oversized);
  EXPECT_NE(oversized.error().message.find("at most"), std::string::npos);
  std::string many = "allot-role-settings 1\nepoch 1\n";
  for (size_t i = 0; i <= kConfiguredRolesMax; ++i) many += "role r" + std::to_string(i) + " weight=1\n";
  auto tooMany = decodeRoleSettings(many);
  ASSERT_FALSE(tooMany);
  EXPECT_NE(tooMany.error().message.find("more than"), std::string::npos);
}

// --- the file store -------------------------------------------------------

class FileRoleStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/allot-role-store-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/role-settings";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Result<RoleSettings> load(const std::string& path) {
    auto store = makeFileRoleStore(io_, path);
    std::optional<Result<RoleSettings>> got;
    store->load([&](Result<RoleSettings> r) { got = std::move(r); });
    EXPECT_FALSE(got) << "completed inside load()";
    EXPECT_TRUE(runUntil(io_, [&] { return got.has_value(); }, 5000ms));
    return got ? std::move(*got) : Result<RoleSettings>(Error{"no answer"});
  }
  Status save(const std::string& path, const RoleSettings& settings) {
    auto store = makeFileRoleStore(io_, path);
    std::optional<Status> got;
    store->save(settings, [&](Status st) { got = std::move(st); });
    EXPECT_TRUE(runUntil(io_, [&] { return got.has_value(); }, 5000ms));
    return got ? *got : Status(Error{"no answer"});
  }

  asio::io_context io_;
  std::string dir_;
  std::string path_;
};

TEST_F(FileRoleStoreTest, NothingStoredIsEmptyAndASaveIsReadBackByTheNextMaster) {
  auto empty = load(path_);
  ASSERT_TRUE(empty) << empty.error().describe();
  EXPECT_TRUE(empty->empty());
  RoleSettings settings;
  settings["batch"] = RoleSetting{3.0, res("cpus:2")};
  ASSERT_TRUE(save(path_, settings));
  struct stat info {};
  ASSERT_EQ(::stat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
  auto again = load(path_);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, settings);
}

TEST_F(FileRoleStoreTest, CorruptOversizedOrUnreadableFilesAreClearErrorsAndASaveReplacesThem) {
  std::ofstream(path_) << "allot-role-settings 1\nepoch 0\nrole batch weight=-4\n";
  auto corrupt = load(path_);
  ASSERT_FALSE(corrupt);
  EXPECT_NE(corrupt.error().message.find(path_ + ": line 3: weight"), std::string::npos)
      << corrupt.error().message;
  RoleSettings settings;
  settings["web"] = RoleSetting{std::nullopt, Resources()};
  ASSERT_TRUE(save(path_, settings));
  EXPECT_EQ(*load(path_), settings);

  std::ofstream(path_, std::ios::trunc) << std::string(kRoleSettingsBytesMax + 1, 'x');
  auto oversized = load(path_);
  ASSERT_FALSE(oversized);
  EXPECT_NE(oversized.error().message.find("at most"), std::string::npos);

  auto directory = load(dir_);
  ASSERT_FALSE(directory);
  EXPECT_NE(directory.error().message.find("not a regular file"), std::string::npos);

  Status noDir = save(dir_ + "/missing/role-settings", settings);
  ASSERT_FALSE(noDir);
  EXPECT_NE(noDir.error().message.find("cannot write"), std::string::npos);
}

// --- precedence and the keeper ---------------------------------------------

// A master whose flags say: role b weight 3, quota cpus:2; role c quota
// cpus:1. One 4-cpu agent.
class RoleSettingsKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MasterOptions options;
    options.masterId = "m";
    options.minOffer = res("cpus:0.01;mem:32");
    options.policy.roles["b"] = RoleConfig{3.0, res("cpus:2")};
    options.policy.roles["c"] = RoleConfig{1.0, res("cpus:1")};
    master_ = std::move(*Master::create(options, clock_, outbox_));
    keeper_ = std::make_unique<RoleSettingsKeeper>(io_, *master_);
    wire::Hello h;
    h.set_role(wire::ROLE_AGENT);
    master_->peerConnected(kAgent, h);
    wire::Envelope e;
    e.mutable_register_agent()->mutable_info()->set_hostname("node");
    res("cpus:4;mem:400").toWire(e.mutable_register_agent()->mutable_info()->mutable_resources());
    master_->peerMessage(kAgent, e);
  }

  void load() {
    bool done = false;
    keeper_->load(std::make_unique<FakeRoleStore>(io_, store_), [&] { done = true; });
    EXPECT_FALSE(keeper_->ready());
    ASSERT_TRUE(runUntil(io_, [&] { return done; }, 5000ms));
    EXPECT_TRUE(keeper_->ready());
  }

  // The keeper's answer: nullopt on success.
  std::optional<RoleSettingsKeeper::SetError> set(const std::string& role, std::optional<double> weight,
                                                  std::optional<Resources> quota) {
    std::optional<std::optional<RoleSettingsKeeper::SetError>> got;
    keeper_->set(role, RoleSetting{weight, quota}, [&](const auto& error) { got = error; });
    EXPECT_FALSE(got) << "answered inside set()";
    EXPECT_TRUE(runUntil(io_, [&] { return got.has_value(); }, 5000ms));
    if (!got) return RoleSettingsKeeper::SetError{RoleSettingsKeeper::Refusal::kUnavailable, "no answer"};
    return *got;
  }

  Master::RoleRow row(const std::string& name) {
    for (const auto& r : master_->roles()) {
      if (r.name == name) return r;
    }
    return Master::RoleRow{"(missing)"};
  }

  // The cpus the one agent offers a new framework of `role`.
  int64_t offeredCpus(PeerId peer, const std::string& role) {
    wire::Hello h;
    h.set_role(wire::ROLE_SCHEDULER);
    master_->peerConnected(peer, h);
    wire::Envelope e;
    e.mutable_register_framework()->mutable_info()->set_name("f");
    e.mutable_register_framework()->mutable_info()->set_role(role);
    e.mutable_register_framework()->set_needs_offers(true);
    master_->peerMessage(peer, e);
    if (master_->allocationPending()) master_->allocate();
    int64_t cpus = 0;
    for (auto& m : outbox_.take(peer, wire::Envelope::kResourceOffers)) {
      for (auto& o : m.resource_offers().offers()) cpus += Resources::fromWire(o.resources())->scalarMillis("cpus");
    }
    return cpus;
  }

  static constexpr PeerId kAgent = 1;
  asio::io_context io_;
  FakeClock clock_;
  RecordingOutbox outbox_;
  std::unique_ptr<Master> master_;
  std::unique_ptr<RoleSettingsKeeper> keeper_;
  std::shared_ptr<FakeRoleStore::Shared> store_ = std::make_shared<FakeRoleStore::Shared>();
};

TEST_F(RoleSettingsKeeperTest, StoredSettingsOverrideTheFlagsFieldByField) {
  store_->stored["b"] = RoleSetting{5.0, std::nullopt};      // weight only: the flag's quota stays
  store_->stored["c"] = RoleSetting{std::nullopt, Resources()};  // quota removed: the flag's weight stays
  store_->stored["d"] = RoleSetting{2.0, res("cpus:3")};    // not in the flags at all
  ASSERT_NO_FATAL_FAILURE(load());
  EXPECT_EQ(row("b").weight, 5.0);
  EXPECT_EQ(row("b").quota, res("cpus:2"));
  EXPECT_TRUE(row("b").runTime);
  EXPECT_EQ(row("c").weight, 1.0);
  EXPECT_TRUE(row("c").quota.empty());
  EXPECT_EQ(row("d").weight, 2.0);
  EXPECT_EQ(row("d").quota, res("cpus:3"));
  EXPECT_EQ(master_->roleSettings(), store_->stored);
  // The allocator follows: d's quota caps its offer at 3 of the 4 cpus.
  EXPECT_EQ(offeredCpus(2, "d"), 3000);
}

// A new leader (master/main.cpp) serves registrations while it reads the
// store, offers held; its first offer is made under the stored settings.
TEST_F(RoleSettingsKeeperTest, ALeaderStillReadingAnswersRegistrationsButOffersOnlyOnceApplied) {
  store_->stored["d"] = RoleSetting{2.0, res("cpus:3")};
  master_->holdOffers();
  bool loaded = false;
  keeper_->load(std::make_unique<FakeRoleStore>(io_, store_), [&] {
    master_->releaseOffers();
    loaded = true;
  });
  // The store has not answered yet: a framework of role d registers.
  constexpr PeerId kScheduler = 2;
  wire::Hello h;
  h.set_role(wire::ROLE_SCHEDULER);
  master_->peerConnected(kScheduler, h);
  wire::Envelope e;
  e.mutable_register_framework()->mutable_info()->set_name("f");
  e.mutable_register_framework()->mutable_info()->set_role("d");
  e.mutable_register_framework()->set_needs_offers(true);
  master_->peerMessage(kScheduler, e);
  EXPECT_EQ(outbox_.take(kScheduler, wire::Envelope::kFrameworkRegistered).size(), 1u);
  EXPECT_FALSE(loaded);
  // Neither the event-driven round nor the periodic cycle offers anything.
  EXPECT_FALSE(master_->allocationPending());
  master_->allocate();
  clock_.advance(5s);
  master_->tick();
  EXPECT_TRUE(outbox_.take(kScheduler, wire::Envelope::kResourceOffers).empty());
  ASSERT_TRUE(runUntil(io_, [&] { return loaded; }, 5000ms));
  EXPECT_FALSE(master_->offersHeld());
  ASSERT_TRUE(master_->allocationPending());
  master_->allocate();
  int64_t cpus = 0;
  for (auto& m : outbox_.take(kScheduler, wire::Envelope::kResourceOffers)) {
    for (auto& o : m.resource_offers().offers()) cpus += Resources::fromWire(o.resources())->scalarMillis("cpus");
  }
  EXPECT_EQ(cpus, 3000);  // d's stored quota, not the whole agent
}

TEST_F(RoleSettingsKeeperTest, ACorruptStoreLeavesTheFlagsAndTheNextChangeReplacesIt) {
  store_->loadError = Error{"file x: line 3: weight '-4' is not in (0, 1e6]"};
  ASSERT_NO_FATAL_FAILURE(load());
  EXPECT_EQ(row("b").weight, 3.0);
  EXPECT_EQ(row("b").quota, res("cpus:2"));
  EXPECT_FALSE(row("b").runTime);
  EXPECT_EQ(set("c", 4.0, std::nullopt), std::nullopt);
  RoleSettings expected;
  expected["c"] = RoleSetting{4.0, std::nullopt};
  EXPECT_EQ(store_->stored, expected);
}

TEST_F(RoleSettingsKeeperTest, AChangeIsStoredMergedBeforeItIsAppliedAndAFailedWriteChangesNothing) {
  auto early = set("b", 4.0, std::nullopt);
  ASSERT_TRUE(early);
  EXPECT_EQ(early->refusal, RoleSettingsKeeper::Refusal::kUnavailable) << "a master that has not loaded took a change";
  EXPECT_EQ(store_->saves, 0);
  ASSERT_NO_FATAL_FAILURE(load());

  auto invalid = set("b", 0.0, std::nullopt);
  ASSERT_TRUE(invalid);
  EXPECT_EQ(invalid->refusal, RoleSettingsKeeper::Refusal::kInvalid);
  EXPECT_EQ(store_->saves, 0) << "an invalid change reached the store";

  EXPECT_EQ(set("b", 4.0, std::nullopt), std::nullopt);
  EXPECT_EQ(set("b", std::nullopt, res("cpus:1")), std::nullopt);
  RoleSettings expected;
  expected["b"] = RoleSetting{4.0, res("cpus:1")};
  EXPECT_EQ(store_->stored, expected);
  EXPECT_EQ(row("b").weight, 4.0);
  EXPECT_EQ(row("b").quota, res("cpus:1"));

  store_->saveError = Error{"cannot write /x: No space left on device"};
  auto failed = set("b", 9.0, std::nullopt);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->refusal, RoleSettingsKeeper::Refusal::kUnavailable);
  EXPECT_NE(failed->message.find("No space"), std::string::npos);
  EXPECT_EQ(row("b").weight, 4.0) << "applied although not stored";
  EXPECT_EQ(master_->roleSettings(), expected);
}

TEST_F(RoleSettingsKeeperTest, WritesGoOneAtATimeAndAnswerOnlyOnceStored) {
  ASSERT_NO_FATAL_FAILURE(load());
  store_->holdSaves = true;
  int answered = 0;
  for (int i = 0; i < 3; ++i) {
    keeper_->set("r" + std::to_string(i), RoleSetting{2.0 + i, std::nullopt},
                 [&](const auto& error) { answered += error ? 100 : 1; });
  }
  runUntil(io_, [] { return false; }, 50ms);
  EXPECT_EQ(answered, 0) << "answered before the store finished";
  EXPECT_EQ(store_->saves, 1) << "a second write started while the first was in flight";
  EXPECT_EQ(row("r0").name, "(missing)") << "applied before stored";
  // Released one by one: each finished save starts the next.
  for (int i = 0; i < 3; ++i) {
    FakeRoleStore::releaseSaves(io_, *store_);
    store_->holdSaves = i < 2;
    ASSERT_TRUE(runUntil(io_, [&] { return answered == i + 1; }, 5000ms)) << answered;
  }
  EXPECT_EQ(store_->savesInFlightMax, 1);
  EXPECT_EQ(store_->stored.size(), 3u);
  EXPECT_EQ(row("r2").weight, 4.0);
}

TEST_F(RoleSettingsKeeperTest, QueuedChangesAreBounded) {
  ASSERT_NO_FATAL_FAILURE(load());
  store_->holdSaves = true;
  int unavailable = 0;
  for (size_t i = 0; i < kRoleWritesPendingMax + 5; ++i) {
    keeper_->set("q", RoleSetting{1.0 + static_cast<double>(i), std::nullopt}, [&](const auto& error) {
      if (error && error->refusal == RoleSettingsKeeper::Refusal::kUnavailable) ++unavailable;
    });
  }
  // One in flight, kRoleWritesPendingMax waiting, the rest refused.
  ASSERT_TRUE(runUntil(io_, [&] { return unavailable == 4; }, 5000ms)) << unavailable;
  FakeRoleStore::releaseSaves(io_, *store_);
}

}  // namespace
}  // namespace allot

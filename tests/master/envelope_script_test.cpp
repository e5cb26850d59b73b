// The fuzz targets' placeholder substitution (tests/fuzz/envelope_script.h):
// replacing placeholders in a step's wire bytes gives the message the
// reflection walk gives on the parsed step, so the master target's inputs
// still reach live ids.
#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include "proto/resources.h"
#include "tests/fuzz/envelope_script.h"

namespace allot::fuzz {
namespace {

// "$x" becomes a longer id and "$y" a shorter one, so lengths change on the
// way up; every other string stays as it is.
void replace(std::string* s) {
  if (*s == "$x") *s = "a-much-longer-live-id-" + std::string(200, 'L');
  else if (*s == "$y") *s = "y";
}

wire::Envelope sample() {
  wire::Envelope e;
  auto* r = e.mutable_register_agent();
  r->mutable_info()->set_id("$x");
  r->mutable_info()->set_hostname("$unknown");
  for (int i = 0; i < 300; ++i) {
    auto* ex = r->add_executors();
    ex->mutable_info()->set_executor_id(i % 7 ? "plain" : "$y");
    auto* t = ex->add_tasks();
    t->set_task_id(i % 5 ? "t" : "$x");
    t->mutable_command()->add_argv(i % 3 ? "$y" : "echo");
    (*t->mutable_command()->mutable_environment())["$x"] = "$y";  // maps are left alone
    Resources::parse("cpus:1;mem:8;ports:[1-2]")->toWire(t->mutable_resources());
    ex->add_latest()->set_message("$x");
  }
  return e;
}

TEST(EnvelopeScript, WireSubstitutionMatchesTheReflectionWalk) {
  wire::Envelope expected = sample();
  std::string bytes = expected.SerializeAsString();
  substituteAll(&expected, replace);

  std::string out;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  ASSERT_TRUE(substituteWire(wire::Envelope::descriptor(), p, p + bytes.size(), &out, replace));
  wire::Envelope got;
  ASSERT_TRUE(got.ParseFromString(out));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(expected, got));
  EXPECT_EQ(got.register_agent().info().id().size(), 222u);
  EXPECT_EQ(got.register_agent().executors(0).tasks(0).command().environment().at("$x"), "$y");
}

TEST(EnvelopeScript, WireSubstitutionRefusesTruncatedBytes) {
  std::string bytes = sample().SerializeAsString();
  bytes.resize(bytes.size() / 2);
  std::string out;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  EXPECT_FALSE(substituteWire(wire::Envelope::descriptor(), p, p + bytes.size(), &out, replace));
}

}  // namespace
}  // namespace allot::fuzz

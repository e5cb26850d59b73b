// appendJson (proto/json_writer.h) against protobuf's own JSON util: what
// it writes reads back into an equal message, and for the /state views it
// is the util's text, byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include "proto/allot.pb.h"
#include "proto/json_writer.h"
#include "proto/state.pb.h"

namespace allot {
namespace {

namespace pb = google::protobuf;

std::string ours(const pb::Message& m) {
  std::string out;
  appendJson(m, &out);
  return out;
}

std::string theirs(const pb::Message& m) {
  pb::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string out;
  EXPECT_TRUE(pb::util::MessageToJsonString(m, &out, options).ok());
  return out;
}

template <typename T>
void expectReadsBack(const T& m) {
  T back;
  std::string json = ours(m);
  auto status = pb::util::JsonStringToMessage(json, &back);
  ASSERT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(m, back)) << json << "\nread back as\n"
                                                              << back.DebugString();
}

state::AgentView agent() {
  state::AgentView a;
  a.set_id("A1\"quoted\"\n\x01");
  a.set_hostname("host-1");
  auto* cpus = a.add_total();
  cpus->set_name("cpus");
  cpus->set_scalar(2.5);
  auto* ports = a.add_total();
  ports->set_name("ports");
  auto* range = ports->add_ranges();
  range->set_begin(31000);
  range->set_end(std::numeric_limits<uint64_t>::max());
  auto* mem = a.add_free();
  mem->set_name("mem");
  mem->set_scalar(0.1);
  auto* attr = a.add_attributes();
  attr->set_name("rack");
  attr->set_value("r-7 ü");
  a.set_connected(true);
  a.set_task_count(3);
  auto* u = a.add_usage();
  u->set_framework_id("F1");
  u->mutable_usage()->set_mem_bytes(123456789012345ull);
  u->mutable_usage()->set_cpu_time_s(1e-7);
  return a;
}

TEST(JsonWriter, StateViewsAreTheUtilsTextByteForByte) {
  state::AgentView a = agent();
  EXPECT_EQ(ours(a), theirs(a));
  state::TaskView t;
  t.set_task_id("t1");
  t.set_state(wire::TASK_FAILED);
  t.set_reason(wire::REASON_AGENT_DRAINED);
  t.set_updated_s(1763946000.123456);
  EXPECT_EQ(ours(t), theirs(t));
  state::FrameworkView f;
  f.set_weight(1);
  f.set_dominant_share(0.25);
  f.set_priority(-4);
  EXPECT_EQ(ours(f), theirs(f));
  // Doubles: the shortest text that reads back exactly; the util prints 17
  // digits where 16 do ("0.33333333333333331"): the same double.
  f.set_dominant_share(1.0 / 3);
  EXPECT_NE(ours(f).find("\"dominantShare\":0.3333333333333333,"), std::string::npos) << ours(f);
  expectReadsBack(f);
  state::OfferView o;
  o.set_expires_in_s(29.999);
  EXPECT_EQ(ours(o), theirs(o)) << "an empty repeated field prints as []";
}

TEST(JsonWriter, EveryKindOfFieldReadsBack) {
  expectReadsBack(agent());
  wire::TaskInfo task;  // a map, bytes, an unset message, nested messages
  task.set_task_id("t");
  task.set_data(std::string("\0\xff\x10z", 4));
  (*task.mutable_command()->mutable_environment())["A"] = "1";
  (*task.mutable_command()->mutable_environment())["B\""] = "x\\y";
  task.mutable_command()->set_shell("echo hi");
  expectReadsBack(task);
  for (size_t n = 0; n < 5; ++n) {  // every base64 padding case
    task.set_data(std::string(n, 'q'));
    expectReadsBack(task);
  }
  state::FrameworkView f;
  f.set_weight(std::numeric_limits<double>::infinity());
  f.set_dominant_share(-std::numeric_limits<double>::infinity());
  expectReadsBack(f);
  f.set_dominant_share(std::nan(""));
  std::string json = ours(f);
  EXPECT_NE(json.find("\"dominantShare\":\"NaN\""), std::string::npos) << json;
}

TEST(JsonWriter, UnsetMessagesAndOneofMembersAreLeftOut) {
  wire::TaskInfo task;
  std::string json = ours(task);
  EXPECT_EQ(json.find("\"command\""), std::string::npos) << json;
  EXPECT_EQ(json, theirs(task));
}

}  // namespace
}  // namespace allot

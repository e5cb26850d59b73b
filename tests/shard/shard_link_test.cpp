#include "proto/shard_link.h"

#include <gtest/gtest.h>

namespace allot {
namespace {

wire::Envelope statusOfSize(size_t messageBytes) {
  wire::Envelope e;
  auto* status = e.mutable_status_update()->mutable_status();
  status->set_task_id("task-1");
  status->set_framework_id("framework-1");
  status->set_message(std::string(messageBytes, 'x'));
  return e;
}

// An agent's envelope passed on as it arrived frames exactly as the parsed
// envelope wrapped in an AgentMessage would: the leader cannot tell.
TEST(AgentMessageFrame, IsByteForByteTheSerializedAgentMessage) {
  for (uint64_t slot : {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{1} << 40}) {
    for (size_t size : {size_t{0}, size_t{100}, size_t{200}, size_t{20000}, size_t{3} << 20}) {
      wire::Envelope e = statusOfSize(size);
      shard::ShardEnvelope wrapped;
      wrapped.mutable_agent_message()->set_slot(slot);
      *wrapped.mutable_agent_message()->mutable_envelope() = e;
      std::string expected;
      ASSERT_TRUE(appendShardFrame(wrapped, &expected, kMaxFrameBytes).ok());
      std::string got = "kept";
      ASSERT_TRUE(appendAgentMessageFrame(slot, e.SerializeAsString(), &got, kMaxFrameBytes).ok());
      EXPECT_EQ(got, "kept" + expected) << "slot " << slot << ", " << size << " bytes";
      std::string serialized = "kept";
      ASSERT_TRUE(appendAgentMessageFrame(slot, e, &serialized, kMaxFrameBytes).ok());
      EXPECT_EQ(serialized, "kept" + expected) << "parsed, slot " << slot << ", " << size << " bytes";
      EXPECT_EQ(agentMessagePayloadBytes(slot, e.ByteSizeLong()), expected.size() - kFrameHeaderBytes);
    }
  }
}

TEST(AgentMessageFrame, AboveTheFrameLimitAppendsNothing) {
  std::string envelope = statusOfSize(1000).SerializeAsString();
  std::string out = "kept";
  Status st = appendAgentMessageFrame(7, envelope, &out, envelope.size());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().describe().find("exceeds the frame limit"), std::string::npos);
  EXPECT_EQ(out, "kept");
  EXPECT_FALSE(appendAgentMessageFrame(7, statusOfSize(1000), &out, envelope.size()).ok());
  EXPECT_EQ(out, "kept");
}

// The leader's message for an agent is found in the payload it came in,
// byte for byte what the envelope parsed from.
TEST(AgentMessageEnvelopeBytes, FindsTheEnvelopeAsItArrived) {
  for (uint64_t slot : {uint64_t{0}, uint64_t{5}, uint64_t{300}}) {
    wire::Envelope e = statusOfSize(200);
    shard::ShardEnvelope wrapped;
    wrapped.mutable_agent_message()->set_slot(slot);
    *wrapped.mutable_agent_message()->mutable_envelope() = e;
    std::string payload = wrapped.SerializeAsString();
    EXPECT_EQ(agentMessageEnvelopeBytes(payload, slot), e.SerializeAsString()) << "slot " << slot;
    EXPECT_TRUE(agentMessageEnvelopeBytes(payload, slot + 1).empty()) << "another slot";
  }
}

// Any other layout of an equal message (fields twice, in another order, or
// with more after them) is left to serializing the parsed envelope again.
TEST(AgentMessageEnvelopeBytes, AnyOtherLayoutIsNotTaken) {
  wire::Envelope e = statusOfSize(20);
  std::string envelope = e.SerializeAsString();
  auto field = [](uint32_t tag, const std::string& bytes) {
    return std::string(1, static_cast<char>(tag)) + static_cast<char>(bytes.size()) + bytes;
  };
  std::string slot7 = std::string("\x08\x07");
  auto wrap = [&](const std::string& inner) { return field(0x62, inner); };
  shard::ShardEnvelope parsed;
  for (const std::string& payload : {wrap(field(0x12, envelope) + slot7),                 // slot last
                                     wrap(slot7 + field(0x12, envelope) + slot7),         // slot twice
                                     wrap(slot7 + field(0x12, "") + field(0x12, envelope)),  // envelope twice
                                     wrap(slot7 + field(0x12, envelope)) + wrap(slot7),   // agent_message twice
                                     std::string("\x08\x01") + wrap(slot7 + field(0x12, envelope))}) {
    ASSERT_TRUE(parsed.ParseFromString(payload));
    ASSERT_EQ(parsed.agent_message().slot(), 7u);
    EXPECT_TRUE(agentMessageEnvelopeBytes(payload, 7).empty());
  }
  EXPECT_EQ(agentMessageEnvelopeBytes(wrap(slot7 + field(0x12, envelope)), 7), envelope);
}

}  // namespace
}  // namespace allot

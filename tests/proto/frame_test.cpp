#include "proto/frame.h"

#include <gtest/gtest.h>

namespace allot {
namespace {

wire::Envelope heartbeat(uint64_t seq) {
  wire::Envelope e;
  e.mutable_heartbeat()->set_sequence(seq);
  return e;
}

TEST(Frame, RoundTripsManyFramesFedByteByByte) {
  std::string bytes;
  for (uint64_t i = 0; i < 50; ++i) ASSERT_TRUE(appendFrame(heartbeat(i), &bytes).ok());
  FrameDecoder decoder;
  wire::Envelope out;
  uint64_t next = 0;
  for (char c : bytes) {
    decoder.append(&c, 1);
    for (;;) {
      auto got = decoder.next(&out);
      ASSERT_TRUE(got.ok());
      if (!*got) break;
      EXPECT_EQ(out.heartbeat().sequence(), next++);
    }
  }
  EXPECT_EQ(next, 50u);
  EXPECT_FALSE(decoder.midFrame());
}

TEST(Frame, HeaderIsBigEndianPayloadLength) {
  std::string bytes;
  ASSERT_TRUE(appendFrame(heartbeat(300), &bytes).ok());
  size_t payload = bytes.size() - kFrameHeaderBytes;
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0);
  EXPECT_EQ(static_cast<unsigned char>(bytes[3]), payload);
}

TEST(Frame, OversizedHeaderIsRejectedBeforeBuffering) {
  FrameDecoder decoder(1024);
  const char header[] = {0x00, 0x00, 0x08, 0x00};  // 2048 bytes announced
  decoder.append(header, 4);
  wire::Envelope out;
  auto got = decoder.next(&out);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message.find("exceeds"), std::string::npos);
}

TEST(Frame, SenderRefusesOversizedAndEmptyMessages) {
  wire::Envelope big;
  big.mutable_error()->set_message(std::string(4096, 'x'));
  std::string bytes;
  EXPECT_FALSE(appendFrame(big, &bytes, 1024).ok());
  EXPECT_TRUE(bytes.empty());
  EXPECT_FALSE(appendFrame(wire::Envelope{}, &bytes).ok());
}

TEST(Frame, TruncatedFrameIsReportedAsMidFrame) {
  std::string bytes;
  ASSERT_TRUE(appendFrame(heartbeat(7), &bytes).ok());
  FrameDecoder decoder;
  decoder.append(bytes.data(), bytes.size() - 1);
  wire::Envelope out;
  auto got = decoder.next(&out);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
  EXPECT_TRUE(decoder.midFrame());
}

TEST(Frame, GarbagePayloadIsUndecodable) {
  FrameDecoder decoder;
  const char frame[] = {0x00, 0x00, 0x00, 0x03, '\xff', '\xff', '\xff'};
  decoder.append(frame, sizeof frame);
  wire::Envelope out;
  EXPECT_FALSE(decoder.next(&out).ok());
}

TEST(Frame, EmptyEnvelopeOnTheWireIsRejected) {
  FrameDecoder decoder;
  const char frame[] = {0x00, 0x00, 0x00, 0x00};
  decoder.append(frame, sizeof frame);
  wire::Envelope out;
  EXPECT_FALSE(decoder.next(&out).ok());
}

}  // namespace
}  // namespace allot

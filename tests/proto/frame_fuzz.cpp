// libFuzzer target for the frame decoder: any byte stream must either decode
// into envelopes that survive a re-encode round trip, or fail cleanly with an
// Error; never crash, hang or read out of bounds (built with ASan+UBSan).
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/frame.h"
#include "proto/resources.h"

namespace {

void checkResources(const allot::ResourceList& list) {
  auto parsed = allot::Resources::fromWire(list);
  if (!parsed.ok()) return;
  allot::ResourceList again;
  parsed->toWire(&again);
  auto back = allot::Resources::fromWire(again);
  if (!back.ok() || !(*back == *parsed)) __builtin_trap();
}

void checkEnvelope(const allot::wire::Envelope& envelope) {
  if (envelope.has_register_agent()) checkResources(envelope.register_agent().info().resources());
  if (envelope.has_resource_offers()) {
    for (const auto& offer : envelope.resource_offers().offers()) checkResources(offer.resources());
  }
  if (envelope.has_accept_offers()) {
    for (const auto& task : envelope.accept_offers().tasks()) checkResources(task.resources());
  }
  std::string bytes;
  if (!allot::appendFrame(envelope, &bytes).ok()) return;
  allot::FrameDecoder decoder;
  decoder.append(bytes.data(), bytes.size());
  allot::wire::Envelope back;
  auto got = decoder.next(&back);
  if (!got.ok() || !*got) __builtin_trap();
  if (back.SerializeAsString() != envelope.SerializeAsString()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Feed in two uneven pieces so partial-frame paths run too.
  allot::FrameDecoder decoder(allot::kMaxFrameBytes);
  size_t split = size == 0 ? 0 : data[0] % (size + 1);
  allot::wire::Envelope envelope;
  for (int piece = 0; piece < 2; ++piece) {
    const uint8_t* start = piece == 0 ? data : data + split;
    size_t length = piece == 0 ? split : size - split;
    decoder.append(reinterpret_cast<const char*>(start), length);
    for (int frames = 0; frames < 1000; ++frames) {
      auto got = decoder.next(&envelope);
      if (!got.ok()) return 0;
      if (!*got) break;
      checkEnvelope(envelope);
    }
  }
  return 0;
}

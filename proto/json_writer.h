// appendJson: a message in protobuf's JSON mapping (proto3), written through
// reflection straight into a string. It prints what
// google::protobuf::util::MessageToJsonString prints with
// always_print_primitive_fields (lowerCamel json names, 64-bit integers as
// strings, enums by name, bytes in base64, maps as objects, every scalar and
// repeated field even when empty; unset messages, oneof members and proto3
// optionals left out), at a fraction of its cost: the util goes through the
// binary encoding and a type resolver for every message, which made GET
// /state hold the master's loop for tens of ms per chunk at 10,000 agents
// (docs/benchmarks.md, "/state under load").
//
// Numbers: doubles in the shortest form that reads back exactly
// (std::to_chars; the util sometimes prints 17 digits where 16 do: the same
// double); NaN and infinities as "NaN", "Infinity", "-Infinity".
// Thread: any (no state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

namespace allot {

void appendJson(const google::protobuf::Message& message, std::string* out);

// The primitives appendJson writes values with, for writers of fixed
// shapes (master/state_items.h) that must print what appendJson prints:
// a string quoted and escaped; a double as above; a 64-bit integer quoted.
void appendJsonString(std::string_view s, std::string* out);
void appendJsonDouble(double v, std::string* out);
void appendJsonUint64(uint64_t v, std::string* out);
void appendJsonUint32(uint32_t v, std::string* out);
void appendJsonInt32(int32_t v, std::string* out);

}  // namespace allot

#include "proto/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include <google/protobuf/descriptor.h>

namespace allot {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Runs of plain characters are appended at once: ids and names rarely
// need an escape.
void appendString(std::string_view s, std::string* out) {
  out->push_back('"');
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        *out += buf;
      }
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

void appendBase64(const std::string& s, std::string* out) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  out->push_back('"');
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    uint32_t v = (uint8_t(s[i]) << 16) | (uint8_t(s[i + 1]) << 8) | uint8_t(s[i + 2]);
    for (int shift : {18, 12, 6, 0}) out->push_back(kAlphabet[(v >> shift) & 63]);
  }
  if (i < s.size()) {
    uint32_t v = uint8_t(s[i]) << 16;
    if (i + 1 < s.size()) v |= uint8_t(s[i + 1]) << 8;
    out->push_back(kAlphabet[(v >> 18) & 63]);
    out->push_back(kAlphabet[(v >> 12) & 63]);
    out->push_back(i + 1 < s.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out->push_back('=');
  }
  out->push_back('"');
}

template <typename T>
void appendNumber(T v, std::string* out) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, end);
}

void appendDouble(double v, std::string* out) {
  if (std::isnan(v)) { *out += "\"NaN\""; return; }
  if (std::isinf(v)) { *out += v > 0 ? "\"Infinity\"" : "\"-Infinity\""; return; }
  appendNumber(v, out);
}

// One value of `field` (element `index` when repeated, else index < 0).
void appendValue(const Message& m, const Reflection& r, const FieldDescriptor* f, int index,
                 std::string* out) {
  bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      appendNumber(rep ? r.GetRepeatedInt32(m, f, index) : r.GetInt32(m, f), out);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      appendNumber(rep ? r.GetRepeatedUInt32(m, f, index) : r.GetUInt32(m, f), out);
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      out->push_back('"');
      appendNumber(rep ? r.GetRepeatedInt64(m, f, index) : r.GetInt64(m, f), out);
      out->push_back('"');
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      out->push_back('"');
      appendNumber(rep ? r.GetRepeatedUInt64(m, f, index) : r.GetUInt64(m, f), out);
      out->push_back('"');
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      appendDouble(rep ? r.GetRepeatedDouble(m, f, index) : r.GetDouble(m, f), out);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT: {
      float v = rep ? r.GetRepeatedFloat(m, f, index) : r.GetFloat(m, f);
      if (std::isfinite(v)) appendNumber(v, out); else appendDouble(v, out);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      *out += (rep ? r.GetRepeatedBool(m, f, index) : r.GetBool(m, f)) ? "true" : "false";
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      int number = rep ? r.GetRepeatedEnumValue(m, f, index) : r.GetEnumValue(m, f);
      const auto* value = f->enum_type()->FindValueByNumber(number);
      if (value) appendString(value->name(), out); else appendNumber(number, out);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;
      const std::string& s = rep ? r.GetRepeatedStringReference(m, f, index, &scratch)
                                 : r.GetStringReference(m, f, &scratch);
      if (f->type() == FieldDescriptor::TYPE_BYTES) appendBase64(s, out); else appendString(s, out);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      appendJson(rep ? r.GetRepeatedMessage(m, f, index) : r.GetMessage(m, f), out);
      break;
  }
}

// A map entry's key as a JSON object key (always a string).
void appendMapKey(const Message& entry, std::string* out) {
  const Reflection& r = *entry.GetReflection();
  const FieldDescriptor* key = entry.GetDescriptor()->map_key();
  if (key->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    appendValue(entry, r, key, -1, out);
  } else {
    std::string text;
    appendValue(entry, r, key, -1, &text);
    if (text.front() != '"') text = "\"" + text + "\"";
    *out += text;
  }
}

}  // namespace

void appendJsonString(std::string_view s, std::string* out) { appendString(s, out); }
void appendJsonDouble(double v, std::string* out) { appendDouble(v, out); }
void appendJsonUint32(uint32_t v, std::string* out) { appendNumber(v, out); }
void appendJsonInt32(int32_t v, std::string* out) { appendNumber(v, out); }
void appendJsonUint64(uint64_t v, std::string* out) {
  out->push_back('"');
  appendNumber(v, out);
  out->push_back('"');
}

void appendJson(const Message& m, std::string* out) {
  const auto* d = m.GetDescriptor();
  const Reflection& r = *m.GetReflection();
  out->push_back('{');
  bool first = true;
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (!f->is_repeated() && f->has_presence() && !r.HasField(m, f)) continue;
    if (!first) out->push_back(',');
    first = false;
    appendString(f->json_name(), out);
    out->push_back(':');
    if (f->is_map()) {
      out->push_back('{');
      int n = r.FieldSize(m, f);
      for (int k = 0; k < n; ++k) {
        const Message& entry = r.GetRepeatedMessage(m, f, k);
        if (k) out->push_back(',');
        appendMapKey(entry, out);
        out->push_back(':');
        appendValue(entry, *entry.GetReflection(), entry.GetDescriptor()->map_value(), -1, out);
      }
      out->push_back('}');
    } else if (f->is_repeated()) {
      out->push_back('[');
      int n = r.FieldSize(m, f);
      for (int k = 0; k < n; ++k) {
        if (k) out->push_back(',');
        appendValue(m, r, f, k, out);
      }
      out->push_back(']');
    } else {
      appendValue(m, r, f, -1, out);
    }
  }
  out->push_back('}');
}

}  // namespace allot

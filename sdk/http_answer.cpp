#include "sdk/http_answer.h"

#include <algorithm>
#include <limits>

namespace allot {
namespace {

// A chunk size of more hex digits than this is refused (it fits 60 bits).
constexpr size_t kChunkSizeDigitsMax = 15;

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equalsLower(std::string_view text, std::string_view lowerCase) {
  return text.size() == lowerCase.size() &&
         std::equal(text.begin(), text.end(), lowerCase.begin(), [](char a, char b) { return lower(a) == b; });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls each(token) for each comma-separated token of a header value.
template <typename Each>
void forEachToken(std::string_view value, Each each) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    each(trim(value.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = lower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

HttpAnswer::State HttpAnswer::fail(std::string why) {
  state_ = State::kBad;
  error_ = std::move(why);
  return state_;
}

HttpAnswer::State HttpAnswer::done() {
  state_ = State::kDone;
  return state_;
}

HttpAnswer::State HttpAnswer::feed(std::string_view bytes, size_t* used) {
  size_t i = 0;
  while (state_ == State::kMore && i < bytes.size()) {
    if (part_ == Part::kLength || part_ == Part::kChunkData || part_ == Part::kUntilClose) {
      uint64_t want = part_ == Part::kUntilClose ? std::numeric_limits<uint64_t>::max() : length_;
      size_t n = drop(bytes.substr(i), want);
      i += n;
      if (part_ != Part::kUntilClose) length_ -= n;
      if (bodyBytes_ > kHttpAnswerBodyBytesMax) {
        keepAlive_ = false;
        done();
      } else if (length_ == 0 && part_ == Part::kLength) {
        done();
      } else if (length_ == 0 && part_ == Part::kChunkData) {
        part_ = Part::kChunkEnd;
        headBytes_ = 0;
      }
      continue;
    }
    size_t eol = bytes.find('\n', i);
    size_t end = eol == std::string_view::npos ? bytes.size() : eol + 1;
    if (headBytes_ + (end - i) > kHttpAnswerHeadBytesMax) {
      fail("a header or chunk line beyond " + std::to_string(kHttpAnswerHeadBytesMax) + " bytes");
      break;
    }
    headBytes_ += end - i;
    if (part_ != Part::kStatus && part_ != Part::kHeaders) bodyBytes_ += end - i;
    line_.append(bytes.substr(i, end - i));
    i = end;
    if (eol == std::string_view::npos) continue;
    line_.pop_back();
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    std::string text = std::move(line_);
    line_.clear();
    line(text);
    if (bodyBytes_ > kHttpAnswerBodyBytesMax && state_ == State::kMore) {
      keepAlive_ = false;
      done();
    }
  }
  *used = i;
  return state_;
}

size_t HttpAnswer::drop(std::string_view bytes, uint64_t want) {
  size_t n = static_cast<size_t>(std::min<uint64_t>(bytes.size(), want));
  bodyBytes_ += n;
  return n;
}

HttpAnswer::State HttpAnswer::closed() {
  if (state_ != State::kMore) return state_;
  if (part_ == Part::kUntilClose) {
    keepAlive_ = false;
    return done();
  }
  if (part_ == Part::kStatus && headBytes_ == 0) return fail("closed without an answer");
  return fail("closed before the answer ended");
}

HttpAnswer::State HttpAnswer::line(std::string_view text) {
  switch (part_) {
    case Part::kStatus:
      return statusLineOf(text);
    case Part::kHeaders:
      return text.empty() ? headEnded() : header(text);
    case Part::kChunkSize:
      return chunkSize(text);
    case Part::kChunkEnd:
      if (!text.empty()) return fail("a chunk longer than its size");
      part_ = Part::kChunkSize;
      headBytes_ = 0;
      return state_;
    case Part::kTrailers:
      return text.empty() ? done() : state_;
    default:
      return fail("internal: a line in a body");
  }
}

// "HTTP/1.1 200 OK" (the reason may be empty or absent).
HttpAnswer::State HttpAnswer::statusLineOf(std::string_view text) {
  bool ok = text.size() >= 12 && text.substr(0, 7) == "HTTP/1." && text[7] >= '0' && text[7] <= '9' &&
            text[8] == ' ' && (text.size() == 12 || text[12] == ' ');
  int code = 0;
  for (size_t i = 9; ok && i < 12; ++i) {
    ok = text[i] >= '0' && text[i] <= '9';
    code = code * 10 + (text[i] - '0');
  }
  if (!ok || code < 100 || code > 599) {
    return fail("no HTTP status line: " + std::string(text.substr(0, 64)));
  }
  statusLine_ = std::string(text);
  status_ = code;
  http10_ = text[7] == '0';
  part_ = Part::kHeaders;
  return state_;
}

HttpAnswer::State HttpAnswer::header(std::string_view text) {
  if (text.front() == ' ' || text.front() == '\t') return fail("a folded header line");
  size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || trim(text.substr(0, colon)).size() != colon) {
    return fail("a malformed header line");
  }
  std::string_view name = text.substr(0, colon);
  std::string_view value = trim(text.substr(colon + 1));
  if (equalsLower(name, "content-length")) {
    if (value.empty() || value.size() > 18 || !std::all_of(value.begin(), value.end(), [](char c) {
          return c >= '0' && c <= '9';
        })) {
      return fail("a bad Content-Length");
    }
    uint64_t length = std::stoull(std::string(value));
    if (hasLength_ && length != length_) return fail("conflicting Content-Lengths");
    hasLength_ = true;
    length_ = length;
  } else if (equalsLower(name, "transfer-encoding")) {
    encoded_ = true;
    forEachToken(value, [this](std::string_view coding) {
      if (!coding.empty()) chunked_ = equalsLower(coding, "chunked");
    });
  } else if (equalsLower(name, "connection")) {
    forEachToken(value, [this](std::string_view option) {
      if (equalsLower(option, "close")) closeAsked_ = true;
      if (equalsLower(option, "keep-alive")) keepAliveAsked_ = true;
    });
  }
  return state_;
}

HttpAnswer::State HttpAnswer::headEnded() {
  keepAlive_ = !closeAsked_ && (!http10_ || keepAliveAsked_);
  if (status_ < 200 && status_ != 101) {
    // An interim answer (100 Continue, 103 Early Hints): the final one
    // follows; the head bound counts both.
    part_ = Part::kStatus;
    hasLength_ = chunked_ = encoded_ = closeAsked_ = keepAliveAsked_ = false;
    length_ = 0;
    return state_;
  }
  if (status_ == 101) keepAlive_ = false;  // the connection speaks another protocol now
  if (status_ < 200 || status_ == 204 || status_ == 304) return done();
  if (encoded_) {
    // Transfer-Encoding wins over Content-Length; a message with both
    // may be an attempt at smuggling, so its connection ends with it.
    if (hasLength_) keepAlive_ = false;
    if (chunked_) {
      part_ = Part::kChunkSize;
      headBytes_ = 0;
      return state_;
    }
    part_ = Part::kUntilClose;
    keepAlive_ = false;
    return state_;
  }
  if (hasLength_) {
    if (length_ > kHttpAnswerBodyBytesMax) {
      keepAlive_ = false;
      return done();
    }
    if (length_ == 0) return done();
    part_ = Part::kLength;
    return state_;
  }
  part_ = Part::kUntilClose;
  keepAlive_ = false;
  return state_;
}

// "1a2b" or "1a2b;name=value" (extensions ignored).
HttpAnswer::State HttpAnswer::chunkSize(std::string_view text) {
  uint64_t size = 0;
  size_t i = 0;
  for (; i < text.size() && hexDigit(text[i]) >= 0; ++i) {
    if (i == kChunkSizeDigitsMax) return fail("a chunk size of too many digits");
    size = size * 16 + static_cast<uint64_t>(hexDigit(text[i]));
  }
  if (i == 0 || (i < text.size() && text[i] != ';' && text[i] != ' ' && text[i] != '\t')) {
    return fail("a bad chunk size line");
  }
  headBytes_ = 0;
  if (size == 0) {
    part_ = Part::kTrailers;
    return state_;
  }
  if (bodyBytes_ + size > kHttpAnswerBodyBytesMax) {
    keepAlive_ = false;
    return done();
  }
  length_ = size;
  part_ = Part::kChunkData;
  return state_;
}

}  // namespace allot

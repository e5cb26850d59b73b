// An HTTP/1.x answer read incrementally, as an HTTP health check
// (sdk/health_check.h) reads it from a connection it keeps between attempts:
// the status line, the headers that frame the body, and the body itself,
// read and dropped, so that the next answer on the connection starts where
// this one ended.
//
// The body is framed as RFC 9112 section 6.3 says for an answer to a GET:
// none for 1xx, 204 and 304; chunked when Transfer-Encoding ends in
// "chunked"; Content-Length bytes when that header is given (once, or
// repeated with one value); otherwise up to the server's close. Anything
// else is a bad answer. Every part is bounded: the status line and headers
// by kHttpAnswerHeadBytesMax, a chunk's size line and the trailers by the
// same, and the body by kHttpAnswerBodyBytesMax, past which the answer ends
// (its status stands) and the connection must not be used again.
//
// Pure: no I/O, no clock. Linear in the bytes fed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace allot {

// The status line and headers of an answer, and the trailers of a chunked one.
inline constexpr size_t kHttpAnswerHeadBytesMax = 8 * 1024;
// A body read (and dropped) to keep the connection; a longer answer ends
// there and its connection is closed.
inline constexpr uint64_t kHttpAnswerBodyBytesMax = 64 * 1024;

class HttpAnswer {
 public:
  enum class State { kMore, kDone, kBad };

  // Reads from `bytes`; *used says how many it took (all of them unless
  // the answer ended within them). After kDone or kBad it takes nothing.
  State feed(std::string_view bytes, size_t* used);
  // The server closed the connection: a body framed by the close ends
  // here; any other unfinished answer is bad.
  State closed();

  State state() const { return state_; }
  int status() const { return status_; }
  // "HTTP/1.1 200 OK", without its line end.
  const std::string& statusLine() const { return statusLine_; }
  // Why the answer is bad.
  const std::string& error() const { return error_; }
  // Done, and the connection may carry the next request: HTTP/1.1 without
  // "Connection: close" (HTTP/1.0 with "Connection: keep-alive"), framed by
  // a length or chunks, and its body within the bound.
  bool keepAlive() const { return state_ == State::kDone && keepAlive_; }

 private:
  enum class Part { kStatus, kHeaders, kLength, kChunkSize, kChunkData, kChunkEnd, kTrailers, kUntilClose };

  State fail(std::string why);
  State done();
  // Takes one line (without its "\r\n" or "\n") of a head part.
  State line(std::string_view text);
  State statusLineOf(std::string_view text);
  State header(std::string_view text);
  State headEnded();
  State chunkSize(std::string_view text);
  // Drops body bytes: at most `want` of `bytes`; returns how many.
  size_t drop(std::string_view bytes, uint64_t want);

  State state_ = State::kMore;
  Part part_ = Part::kStatus;
  std::string line_;     // a head line, chunk size line or trailer read so far
  size_t headBytes_ = 0;  // of the head, then of chunk size lines and trailers
  int status_ = 0;
  bool http10_ = false;
  bool keepAlive_ = true;
  bool encoded_ = false;  // a Transfer-Encoding header
  bool chunked_ = false;  // its last coding is chunked
  bool closeAsked_ = false;
  bool keepAliveAsked_ = false;
  bool hasLength_ = false;
  uint64_t length_ = 0;     // Content-Length, then what is left of the body or chunk
  uint64_t bodyBytes_ = 0;  // dropped so far
  std::string statusLine_;
  std::string error_;
};

}  // namespace allot

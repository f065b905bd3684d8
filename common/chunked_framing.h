// Strict chunked framing of request bodies (RFC 9112 §7.1), checked on the
// raw bytes before http-parser sees them.
//
// Debian's http-parser 2.9 is built without HTTP_PARSER_STRICT, and then it
// takes any two bytes where CRLF must follow chunk data and lets a bare LF
// pass inside a chunk extension. A proxy in front that frames the same bytes
// strictly reads a different request boundary than we do: the smuggling
// shape (issue 27, item 5a). The HTTP server runs every byte of a chunked
// body through one ChunkedFraming first and answers 400 where it objects, so
// the parser only ever sees framing both readings agree on.
//
// One per request, owned by its connection on the loop thread; it keeps no
// bytes, only where in the grammar it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace eq::http {

class ChunkedFraming {
 public:
  enum class Verdict {
    kMore,      // every byte fits; the body goes on
    kComplete,  // the body (trailers included) ends after `used` bytes
    kBad,       // the byte at `used` breaks the framing; `error` says how
  };
  struct Step {
    Verdict verdict;
    size_t used;
    const char* error;  // static text, nullptr unless kBad
  };

  // Scans the next bytes of the body, from where the previous call stopped.
  // After kComplete or kBad the object is spent; a new request needs a new one.
  Step scan(std::string_view bytes);

 private:
  enum class State {
    kSizeStart,     // first hex digit of a chunk size
    kSize,          // more hex digits, or the end of the size
    kExtension,     // ";name=value" and whitespace up to CR
    kSizeLf,        // LF after the size line's CR
    kData,          // chunk data, left_ bytes to go
    kDataCr,        // the CR after chunk data
    kDataLf,        // the LF after chunk data
    kTrailerStart,  // a trailer field line, or the CR of the final CRLF
    kTrailer,       // inside a trailer field line
    kTrailerLf,     // LF after a trailer line's CR
    kEndLf,         // LF of the final CRLF
    kDone,
  };
  State state_ = State::kSizeStart;
  uint64_t left_ = 0;  // the chunk size being read, then the data bytes left
};

}  // namespace eq::http

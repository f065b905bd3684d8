// See chunked_framing.h.
#include "common/chunked_framing.h"

#include <algorithm>

namespace eq::http {
namespace {

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Field and extension text: visible characters, space, tab and obs-text.
// CR and LF end a line and are handled by the caller; other controls
// (NUL, DEL, ...) have no place in either.
bool isLineText(char c) {
  auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}

}  // namespace

ChunkedFraming::Step ChunkedFraming::scan(std::string_view bytes) {
  auto bad = [](size_t at, const char* why) { return Step{Verdict::kBad, at, why}; };
  for (size_t i = 0; i < bytes.size(); ++i) {
    char c = bytes[i];
    switch (state_) {
      case State::kSizeStart:
        if (hexValue(c) < 0) return bad(i, "chunk size expected (hex digits)");
        left_ = static_cast<uint64_t>(hexValue(c));
        state_ = State::kSize;
        break;
      case State::kSize:
        if (int v = hexValue(c); v >= 0) {
          // Any size past the body limit is refused later (413); this only
          // keeps the arithmetic whole.
          if (left_ > (UINT64_MAX >> 4)) return bad(i, "chunk size too large");
          left_ = left_ << 4 | static_cast<uint64_t>(v);
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = State::kExtension;
        } else if (c == '\r') {
          state_ = State::kSizeLf;
        } else {
          return bad(i, "chunk size expected (hex digits)");
        }
        break;
      case State::kExtension:
        if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (c == '\n') {
          return bad(i, "bare LF in a chunk extension (use CRLF)");
        } else if (!isLineText(c)) {
          return bad(i, "control character in a chunk extension");
        }
        break;
      case State::kSizeLf:
        if (c != '\n') return bad(i, "chunk size line not ended by CRLF");
        state_ = left_ == 0 ? State::kTrailerStart : State::kData;
        break;
      case State::kData: {
        // Data is opaque: skip it whole, not byte by byte.
        size_t take = static_cast<size_t>(std::min<uint64_t>(left_, bytes.size() - i));
        left_ -= take;
        i += take - 1;
        if (left_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
        if (c != '\r') return bad(i, "chunk data not followed by CRLF");
        state_ = State::kDataLf;
        break;
      case State::kDataLf:
        if (c != '\n') return bad(i, "chunk data not followed by CRLF");
        state_ = State::kSizeStart;
        break;
      case State::kTrailerStart:
        if (c == '\r') {
          state_ = State::kEndLf;
        } else if (c == ' ' || c == '\t') {
          return bad(i, "obsolete line folding in a chunked trailer");
        } else if (c == '\n') {
          return bad(i, "bare LF after the last chunk (use CRLF)");
        } else if (!isLineText(c)) {
          return bad(i, "control character in a chunked trailer");
        } else {
          state_ = State::kTrailer;
        }
        break;
      case State::kTrailer:
        if (c == '\r') {
          state_ = State::kTrailerLf;
        } else if (c == '\n') {
          return bad(i, "bare LF in a chunked trailer (use CRLF)");
        } else if (!isLineText(c)) {
          return bad(i, "control character in a chunked trailer");
        }
        break;
      case State::kTrailerLf:
        if (c != '\n') return bad(i, "chunked trailer line not ended by CRLF");
        state_ = State::kTrailerStart;
        break;
      case State::kEndLf:
        if (c != '\n') return bad(i, "chunked body not ended by CRLF");
        state_ = State::kDone;
        return Step{Verdict::kComplete, i + 1, nullptr};
      case State::kDone:
        return bad(i, "bytes after the end of a chunked body");
    }
  }
  return Step{Verdict::kMore, bytes.size(), nullptr};
}

}  // namespace eq::http

// Structured logging: one JSON object per line on stderr.
//
// The minimum level is the one piece of process-wide state in the project: it
// is set once in main() before any thread starts and only read afterwards.
// Each line is formatted into one buffer and written with a single write(2)
// (or several whole lines in one, see holdLines()), so lines from several
// threads never interleave.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace eq::log {

enum class Level { kDebug, kInfo, kWarn, kError };

// A field value: text or a number (integers and floats are both written as
// JSON numbers).
using Value = std::variant<std::string_view, long long, double>;
using Field = std::pair<std::string_view, Value>;

void setLevel(std::string_view level);
void setComponent(std::string_view component);  // "api", "worker", ...
bool enabled(Level level);

void write(Level level, std::string_view msg, std::initializer_list<Field> fields = {});

// From now on, lines this thread writes below warn level are held in a
// buffer of the thread's and written by flushHeld(), one write(2) for all
// of them; a warning or an error, or 64 KiB held, flushes at once. eq-api's
// loop thread holds its access-log lines and flushes once per loop
// iteration, before it waits for I/O: one write per iteration instead of one
// per request. A crash loses at most the lines of the iteration in progress.
void holdLines();
void flushHeld();  // this thread's held lines, if any

inline void debug(std::string_view msg, std::initializer_list<Field> f = {}) {
  write(Level::kDebug, msg, f);
}
inline void info(std::string_view msg, std::initializer_list<Field> f = {}) {
  write(Level::kInfo, msg, f);
}
inline void warn(std::string_view msg, std::initializer_list<Field> f = {}) {
  write(Level::kWarn, msg, f);
}
inline void error(std::string_view msg, std::initializer_list<Field> f = {}) {
  write(Level::kError, msg, f);
}

}  // namespace eq::log

// File: base/shortest_double.h
//
// A double as text in the fewest digits that read back as the same double ("0.8", "1e-05",
// "134217728"): for messages and printed settings, where two values that differ must not print
// the same.
#ifndef CHORUS_BASE_SHORTEST_DOUBLE_H_
#define CHORUS_BASE_SHORTEST_DOUBLE_H_

#include <charconv>
#include <string>
#include <system_error>

namespace chorus {

inline std::string ShortestDouble(double value) {
  char buffer[32];  // the longest shortest form of a double is 24 characters
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (ec != std::errc()) return "?";
  return std::string(buffer, end);
}

}  // namespace chorus

#endif  // CHORUS_BASE_SHORTEST_DOUBLE_H_

// File: test/fuzz/fuzz_text.h
//
// Printable text drawn from a fuzz input, for fields chorus itself writes (chorusrun's words and
// host names in a published generation): proto3 `string` fields must be UTF-8, and only bytes
// chorus could have produced belong there.
//
// Thread-safety: stateless.
#ifndef CHORUS_TEST_FUZZ_FUZZ_TEXT_H_
#define CHORUS_TEST_FUZZ_FUZZ_TEXT_H_

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <string>

namespace chorus::fuzz {

// Up to `max` characters of printable ASCII: every byte b drawn becomes 0x20 + b % 0x5f.
inline std::string PrintableText(FuzzedDataProvider& in, size_t max) {
  std::string text = in.ConsumeRandomLengthString(max);
  for (char& c : text) c = static_cast<char>(0x20 + static_cast<unsigned char>(c) % 0x5f);
  return text;
}

}  // namespace chorus::fuzz

#endif  // CHORUS_TEST_FUZZ_FUZZ_TEXT_H_

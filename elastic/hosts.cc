#include "elastic/hosts.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace chorus::elastic {

bool IsValidHostName(absl::string_view host) {
  if (host.empty()) return false;
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
      return false;
    }
  }
  return true;
}

bool ParseSlotCount(absl::string_view text, int* slots) {
  int value = 0;
  if (text.empty() || !absl::SimpleAtoi(text, &value) || value < 1 || value > kMaxSlots) {
    return false;
  }
  // SimpleAtoi accepts a leading '+' and surrounding spaces; a slot count is plain digits.
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  *slots = value;
  return true;
}

}  // namespace chorus::elastic

#include "launcher/hosts/hosts.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace chorus::launcher {
namespace {

absl::Status CheckUnique(const std::vector<HostSlots>& hosts, absl::string_view where) {
  std::set<std::string> seen;
  for (const HostSlots& h : hosts) {
    if (!seen.insert(h.host).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "host '", h.host, "' is listed more than once"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<HostSlots>> ParseHosts(absl::string_view text) {
  std::vector<HostSlots> hosts;
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError("empty host list; expected host:slots[,host:slots...]");
  }
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    const size_t colon = entry.rfind(':');
    HostSlots h;
    if (colon == absl::string_view::npos || !IsValidHostName(entry.substr(0, colon)) ||
        !ParseSlotCount(entry.substr(colon + 1), &h.slots)) {
      return absl::InvalidArgumentError(absl::StrCat("malformed host '", entry, "' in '", text,
                                                     "'; expected host:slots with slots in [1, ",
                                                     kMaxSlots, "] (e.g. host1:2,host2:4)"));
    }
    h.host = std::string(entry.substr(0, colon));
    hosts.push_back(std::move(h));
  }
  if (absl::Status s = CheckUnique(hosts, ""); !s.ok()) return s;
  return hosts;
}

absl::StatusOr<std::vector<HostSlots>> ParseHostfile(absl::string_view contents,
                                                     absl::string_view file_name) {
  std::vector<HostSlots> hosts;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_number;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    const std::string where = absl::StrCat(file_name, ":", line_number, ": ");
    HostSlots h;
    h.slots = 1;
    if (!IsValidHostName(words[0])) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "malformed host name '", words[0], "'; expected 'host slots=N'"));
    }
    h.host = std::string(words[0]);
    if (words.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "unexpected '", words[2], "'; expected 'host slots=N'"));
    }
    if (words.size() == 2) {
      absl::string_view value = words[1];
      if (!absl::ConsumePrefix(&value, "slots=") || !ParseSlotCount(value, &h.slots)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "malformed '", words[1], "'; expected slots=N with N in [1, ", kMaxSlots, "]"));
      }
    }
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("hostfile ", file_name, " lists no hosts"));
  }
  if (absl::Status s = CheckUnique(hosts, absl::StrCat(file_name, ": ")); !s.ok()) return s;
  return hosts;
}

absl::StatusOr<std::vector<HostSlots>> ReadHostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read hostfile '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::NotFoundError(absl::StrCat("cannot read hostfile '", path, "'"));
  return ParseHostfile(buffer.str(), path);
}

std::string FormatHosts(const std::vector<HostSlots>& hosts) {
  return absl::StrJoin(hosts, ",", [](std::string* out, const HostSlots& h) {
    absl::StrAppend(out, h.host, ":", h.slots);
  });
}

int64_t TotalSlots(const std::vector<HostSlots>& hosts) {
  int64_t total = 0;
  for (const HostSlots& h : hosts) total += h.slots;
  return total;
}

}  // namespace chorus::launcher

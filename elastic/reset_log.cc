#include "elastic/reset_log.h"

#include <string.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chorus::elastic {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

std::string FormatResetLine(const ResetRecord& r) {
  std::vector<std::string> items;
  auto with_notes = [&r](std::string item, const std::string& host) {
    auto it = r.notes.find(host);
    if (it != r.notes.end() && !it->second.empty()) {
      absl::StrAppend(&item, " (", absl::StrJoin(it->second, ", "), ")");
    }
    return item;
  };
  for (const std::string& host : r.previous_hosts) {
    if (!Contains(r.current_hosts, host)) items.push_back(with_notes("-" + host, host));
  }
  for (const std::string& host : r.current_hosts) {
    if (!Contains(r.previous_hosts, host)) {
      items.push_back(with_notes("+" + host, host));
    } else if (r.notes.count(host) > 0) {
      items.push_back(with_notes(host, host));
    }
  }
  for (const auto& [host, notes] : r.notes) {
    if (!Contains(r.previous_hosts, host) && !Contains(r.current_hosts, host)) {
      items.push_back(with_notes("-" + host, host));
    }
  }
  std::string line = absl::StrCat("chorusrun: generation ", r.generation, ": ");
  if (!items.empty()) absl::StrAppend(&line, absl::StrJoin(items, " "), ", ");
  absl::StrAppend(&line, "size ", r.previous_size, " -> ", r.current_size, ", cause: ", r.cause);
  return line;
}

}  // namespace chorus::elastic

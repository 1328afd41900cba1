#include "launcher/hosts/slurm.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace chorus::launcher {
namespace {

constexpr size_t kMaxNames = 1000000;
constexpr int kMaxTasks = 1000000;

absl::Status BadNodelist(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed Slurm node list '", text, "': ", why));
}

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The names of one bracket's contents ("01-03,7" -> 01 02 03 7).
absl::StatusOr<std::vector<std::string>> ExpandRanges(absl::string_view ranges,
                                                      absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view range : absl::StrSplit(ranges, ',')) {
    const size_t dash = range.find('-');
    const absl::string_view lo_text = range.substr(0, dash);
    const absl::string_view hi_text =
        dash == absl::string_view::npos ? lo_text : range.substr(dash + 1);
    uint64_t lo = 0, hi = 0;
    if (!AllDigits(lo_text) || !AllDigits(hi_text) || !absl::SimpleAtoi(lo_text, &lo) ||
        !absl::SimpleAtoi(hi_text, &hi)) {
      return BadNodelist(list, absl::StrCat("'", range, "' is not a number or a range N-M"));
    }
    if (hi < lo) return BadNodelist(list, absl::StrCat("range '", range, "' ends below its start"));
    if (hi - lo >= kMaxNames) return BadNodelist(list, "more than 1000000 names");
    for (uint64_t v = lo; v <= hi; ++v) {
      std::string digits = absl::StrCat(v);
      if (digits.size() < lo_text.size()) {
        digits.insert(0, lo_text.size() - digits.size(), '0');
      }
      out.push_back(std::move(digits));
      if (out.size() > kMaxNames) return BadNodelist(list, "more than 1000000 names");
    }
  }
  return out;
}

// The names of one entry ("rack[1-2]-n[1-2]" -> rack1-n1 rack1-n2 rack2-n1 rack2-n2).
absl::Status ExpandEntry(absl::string_view entry, absl::string_view list,
                         std::vector<std::string>* names) {
  if (entry.empty()) return BadNodelist(list, "empty entry");
  std::vector<std::string> partial = {""};
  size_t i = 0;
  while (i < entry.size()) {
    const size_t open = entry.find('[', i);
    const absl::string_view literal =
        entry.substr(i, open == absl::string_view::npos ? open : open - i);
    if (literal.find(']') != absl::string_view::npos) return BadNodelist(list, "unbalanced ']'");
    // The names become hosts, as -H and hostfiles give them: the same characters only.
    if (!literal.empty() && !IsValidHostName(literal)) {
      return BadNodelist(list, absl::StrCat("'", absl::CHexEscape(literal),
                                            "' holds a character a host name cannot (letters, "
                                            "digits, '.', '-', '_')"));
    }
    for (std::string& p : partial) absl::StrAppend(&p, literal);
    if (open == absl::string_view::npos) break;
    const size_t close = entry.find(']', open);
    if (close == absl::string_view::npos) return BadNodelist(list, "unbalanced '['");
    absl::StatusOr<std::vector<std::string>> values =
        ExpandRanges(entry.substr(open + 1, close - open - 1), list);
    if (!values.ok()) return values.status();
    if (partial.size() * values->size() > kMaxNames) {
      return BadNodelist(list, "more than 1000000 names");
    }
    std::vector<std::string> next;
    next.reserve(partial.size() * values->size());
    for (const std::string& p : partial) {
      for (const std::string& v : *values) next.push_back(absl::StrCat(p, v));
    }
    partial = std::move(next);
    i = close + 1;
  }
  for (std::string& p : partial) {
    if (names->size() >= kMaxNames) return BadNodelist(list, "more than 1000000 names");
    names->push_back(std::move(p));
  }
  return absl::OkStatus();
}

const std::string* Find(const Environment& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseSlurmNodelist(absl::string_view text) {
  std::vector<std::string> names;
  const absl::string_view list = absl::StripAsciiWhitespace(text);
  if (list.empty()) return BadNodelist(text, "empty");
  // Split at commas outside brackets.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') {
      if (++depth > 1) return BadNodelist(list, "nested '['");
    } else if (c == ']') {
      if (--depth < 0) return BadNodelist(list, "unbalanced ']'");
    } else if (c == ',' && depth == 0) {
      if (absl::Status s = ExpandEntry(list.substr(start, i - start), list, &names); !s.ok()) {
        return s;
      }
      start = i + 1;
    }
  }
  if (depth != 0) return BadNodelist(list, "unbalanced '['");
  return names;
}

absl::StatusOr<std::vector<int>> ParseSlurmTasksPerNode(absl::string_view text) {
  std::vector<int> counts;
  auto bad = [&](absl::string_view entry) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed SLURM_TASKS_PER_NODE '", text, "' at '", entry,
                     "': expected N or N(xK) entries, comma-separated"));
  };
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    absl::string_view count_text = entry;
    absl::string_view repeat_text = "1";
    if (const size_t paren = entry.find('('); paren != absl::string_view::npos) {
      count_text = entry.substr(0, paren);
      repeat_text = entry.substr(paren + 1);
      if (!absl::ConsumePrefix(&repeat_text, "x") || !absl::ConsumeSuffix(&repeat_text, ")")) {
        return bad(entry);
      }
    }
    int count = 0, repeat = 0;
    if (!AllDigits(count_text) || !AllDigits(repeat_text) ||
        !absl::SimpleAtoi(count_text, &count) || !absl::SimpleAtoi(repeat_text, &repeat) ||
        count < 1 || count > kMaxTasks || repeat < 1 ||
        counts.size() + static_cast<size_t>(repeat) > kMaxNames) {
      return bad(entry);
    }
    counts.insert(counts.end(), static_cast<size_t>(repeat), count);
  }
  return counts;
}

absl::StatusOr<std::optional<std::vector<HostSlots>>> SlurmHosts(const Environment& env) {
  const char* nodelist_name = "SLURM_JOB_NODELIST";
  const std::string* nodelist = Find(env, nodelist_name);
  if (nodelist == nullptr) {
    nodelist_name = "SLURM_NODELIST";
    nodelist = Find(env, nodelist_name);
  }
  if (nodelist == nullptr) return std::optional<std::vector<HostSlots>>();
  absl::StatusOr<std::vector<std::string>> nodes = ParseSlurmNodelist(*nodelist);
  if (!nodes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(nodelist_name, ": ", nodes.status().message()));
  }
  std::vector<int> slots;
  if (const std::string* per_node = Find(env, "SLURM_TASKS_PER_NODE")) {
    absl::StatusOr<std::vector<int>> counts = ParseSlurmTasksPerNode(*per_node);
    if (!counts.ok()) return counts.status();
    if (counts->size() != nodes->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SLURM_TASKS_PER_NODE '", *per_node, "' counts ", counts->size(),
                       " nodes but ", nodelist_name, " '", *nodelist, "' lists ", nodes->size()));
    }
    slots = *std::move(counts);
  } else if (const std::string* ntasks_text = Find(env, "SLURM_NTASKS")) {
    int ntasks = 0;
    if (!AllDigits(*ntasks_text) || !absl::SimpleAtoi(*ntasks_text, &ntasks) || ntasks < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed SLURM_NTASKS '", *ntasks_text, "': expected a count >= 1"));
    }
    const int n = static_cast<int>(nodes->size());
    for (int i = 0; i < n; ++i) slots.push_back(ntasks / n + (i < ntasks % n ? 1 : 0));
  } else {
    slots.assign(nodes->size(), 1);
  }
  std::vector<HostSlots> hosts;
  for (size_t i = 0; i < nodes->size(); ++i) {
    if (slots[i] > 0) hosts.push_back({(*nodes)[i], slots[i]});
  }
  return std::optional<std::vector<HostSlots>>(std::move(hosts));
}

}  // namespace chorus::launcher

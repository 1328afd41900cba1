#include "elastic/host_discovery.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace chorus::elastic {
namespace {

constexpr size_t kMaxStderrTail = 4096;
constexpr size_t kMaxQuotedLine = 200;

// A line of the script's output, shortened for a message.
std::string Quote(absl::string_view text) {
  if (text.size() <= kMaxQuotedLine) return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, kMaxQuotedLine), "...'");
}

// The last non-blank line of `text`, or "".
absl::string_view LastLine(absl::string_view text) {
  text = absl::StripTrailingAsciiWhitespace(text);
  const size_t nl = text.rfind('\n');
  return nl == absl::string_view::npos ? text : text.substr(nl + 1);
}

std::string ScriptName(const DiscoveryOptions& options) {
  return absl::StrCat("host discovery script ", Quote(options.script));
}

}  // namespace

void AppendScriptOutput(ScriptRun& run, bool is_stdout, absl::string_view bytes) {
  if (is_stdout) {
    const size_t room = kMaxDiscoveryOutputBytes - run.stdout_text.size();
    if (bytes.size() > room) run.stdout_overflow = true;
    run.stdout_text.append(bytes.data(), std::min(room, bytes.size()));
    return;
  }
  run.stderr_tail.append(bytes.data(), bytes.size());
  if (run.stderr_tail.size() > kMaxStderrTail) {
    run.stderr_tail.erase(0, run.stderr_tail.size() - kMaxStderrTail);
  }
}

absl::Status ValidateDiscoveryOptions(const DiscoveryOptions& options) {
  if (absl::StripAsciiWhitespace(options.script).empty()) {
    return absl::InvalidArgumentError("the host discovery script is empty");
  }
  if (options.default_slots < 1 || options.default_slots > kMaxSlots) {
    return absl::InvalidArgumentError(absl::StrCat("--slots-per-host ", options.default_slots,
                                                   " is outside [1, ", kMaxSlots, "]"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the host discovery timeout ", absl::FormatDuration(options.timeout), " is not positive"));
  }
  if (options.grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the host discovery grace period ", absl::FormatDuration(options.grace), " is negative"));
  }
  return absl::OkStatus();
}

absl::StatusOr<HostSet> ParseDiscoveryOutput(absl::string_view output, int default_slots) {
  HostSet hosts;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    const size_t colon = line.find(':');
    const absl::string_view host = line.substr(0, colon);
    int slots = default_slots;
    if (!IsValidHostName(host) ||
        (colon != absl::string_view::npos && !ParseSlotCount(line.substr(colon + 1), &slots))) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": malformed host ", Quote(line),
                       "; expected 'host' or 'host:slots' with slots in [1, ", kMaxSlots, "]"));
    }
    auto [it, inserted] = hosts.emplace(std::string(host), slots);
    if (!inserted) it->second = std::max(it->second, slots);
  }
  return hosts;
}

absl::StatusOr<HostSet> InterpretScriptRun(const DiscoveryOptions& options, const ScriptRun& run) {
  if (run.stop_signal) {
    return absl::CancelledError(absl::StrCat(ScriptName(options),
                                             " was stopped: chorusrun received signal ",
                                             SignalName(*run.stop_signal)));
  }
  if (run.timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat(ScriptName(options), " did not finish within the timeout of ",
                     absl::FormatDuration(options.timeout), "; its process group was killed"));
  }
  if (!run.exit.ok()) {
    std::string message =
        run.exit.signaled
            ? absl::StrCat(ScriptName(options), " was killed by signal ", SignalName(run.exit.code))
            : absl::StrCat(ScriptName(options), " exited with code ", run.exit.code);
    if (absl::string_view last = LastLine(run.stderr_tail); !last.empty()) {
      absl::StrAppend(&message, "; its last stderr line: ", Quote(last));
    }
    return absl::UnavailableError(message);
  }
  if (run.stdout_overflow) {
    return absl::InvalidArgumentError(absl::StrCat(ScriptName(options), " printed more than ",
                                                   kMaxDiscoveryOutputBytes, " bytes"));
  }
  absl::StatusOr<HostSet> hosts = ParseDiscoveryOutput(run.stdout_text, options.default_slots);
  if (!hosts.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ScriptName(options), " printed ", hosts.status().message()));
  }
  return hosts;
}

absl::StatusOr<DiscoveryJudge::Result> DiscoveryJudge::Judge(const absl::StatusOr<ScriptRun>& run) {
  absl::StatusOr<HostSet> hosts =
      run.ok() ? InterpretScriptRun(options_, *run) : absl::StatusOr<HostSet>(run.status());
  if (hosts.ok()) {
    last_good_ = *hosts;
    return Result{*std::move(hosts), ""};
  }
  if (!last_good_ || absl::IsCancelled(hosts.status())) return hosts.status();
  return Result{*last_good_,
                absl::StrCat(hosts.status().message(), "; keeping the last discovered hosts")};
}

}  // namespace chorus::elastic

// Fuzzes what a host discovery script hands chorusrun (elastic/host_discovery.h): its stdout, its
// stderr and how it ended, judged by ParseDiscoveryOutput, InterpretScriptRun and a
// DiscoveryJudge over several runs.
//
// Input (FuzzedDataProvider): --slots-per-host, then runs until the input ends, each: how it
// ended (exit code or signal, timed out, a signal to chorusrun) and chunks of stdout and stderr
// as the discovery runner appends them (AppendScriptOutput).
//
// Properties: no crash; ParseDiscoveryOutput accepts only valid host names with slots in
// [1, kMaxSlots] and fails with InvalidArgument naming a line; InterpretScriptRun's errors have
// the documented codes, name the script and stay short (a quoted line is cut); the judge returns
// the last good hosts with a warning after a failure, and errors only before a first success or
// for Cancelled.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

#include "elastic/host_discovery.h"
#include "test/fuzz/fuzz_check.h"

namespace chorus::elastic {
namespace {

void CheckHostSet(const HostSet& hosts) {
  for (const auto& [host, slots] : hosts) {
    FUZZ_CHECK(IsValidHostName(host)) << "accepted host '" << host << "'";
    FUZZ_CHECK(slots >= 1 && slots <= kMaxSlots) << "host '" << host << "' has " << slots;
  }
}

}  // namespace
}  // namespace chorus::elastic

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::elastic;
  FuzzedDataProvider in(data, size);
  DiscoveryOptions options;
  options.script = "./discover.sh";
  options.default_slots = in.ConsumeIntegralInRange<int>(1, kMaxSlots);
  FUZZ_CHECK(ValidateDiscoveryOptions(options).ok());
  DiscoveryJudge judge(options);
  bool succeeded = false;
  // The longest message: the script's name, a quoted line of 200 bytes, and the words around.
  constexpr size_t kMaxMessage = 600;

  while (in.remaining_bytes() > 0) {
    ScriptRun run;
    run.exit.signaled = in.ConsumeBool();
    run.exit.code = in.ConsumeIntegral<int>();
    run.timed_out = in.ConsumeProbability<float>() < 0.1f;
    if (in.ConsumeProbability<float>() < 0.1f) run.stop_signal = in.ConsumeIntegral<int>();
    const int chunks = in.ConsumeIntegralInRange<int>(0, 8);
    for (int c = 0; c < chunks; ++c) {
      const bool is_stdout = in.ConsumeBool();
      std::string bytes = in.ConsumeRandomLengthString(4096);
      // Now and then a flood, to pass the bound on stdout.
      if (in.ConsumeProbability<float>() < 0.02f) bytes.resize(kMaxDiscoveryOutputBytes / 2, 'x');
      AppendScriptOutput(run, is_stdout, bytes);
    }
    FUZZ_CHECK(run.stdout_text.size() <= kMaxDiscoveryOutputBytes);

    absl::StatusOr<HostSet> parsed = ParseDiscoveryOutput(run.stdout_text, options.default_slots);
    if (parsed.ok()) {
      CheckHostSet(*parsed);
    } else {
      FUZZ_CHECK(absl::IsInvalidArgument(parsed.status())) << parsed.status();
      FUZZ_CHECK(absl::StartsWith(parsed.status().message(), "line ")) << parsed.status();
      FUZZ_CHECK(parsed.status().message().size() < kMaxMessage) << parsed.status();
    }

    absl::StatusOr<HostSet> judged = InterpretScriptRun(options, run);
    if (judged.ok()) {
      CheckHostSet(*judged);
      FUZZ_CHECK(run.exit.ok() && !run.timed_out && !run.stop_signal && !run.stdout_overflow);
      FUZZ_CHECK(parsed.ok() && *parsed == *judged);
    } else {
      const absl::Status& s = judged.status();
      FUZZ_CHECK(s.message().find("./discover.sh") != absl::string_view::npos) << s;
      FUZZ_CHECK(s.message().size() < kMaxMessage) << s.message().size() << " bytes: " << s;
      if (run.stop_signal) {
        FUZZ_CHECK(absl::IsCancelled(s)) << s;
      } else if (run.timed_out) {
        FUZZ_CHECK(absl::IsDeadlineExceeded(s)) << s;
      } else if (!run.exit.ok()) {
        FUZZ_CHECK(absl::IsUnavailable(s)) << s;
      } else {
        FUZZ_CHECK(absl::IsInvalidArgument(s)) << s;
      }
    }

    absl::StatusOr<DiscoveryJudge::Result> result = judge.Judge(run);
    if (judged.ok()) {
      FUZZ_CHECK(result.ok() && result->warning.empty() && result->hosts == *judged);
      succeeded = true;
    } else if (!succeeded || absl::IsCancelled(judged.status())) {
      FUZZ_CHECK(!result.ok() && result.status() == judged.status()) << result.status();
    } else {
      FUZZ_CHECK(result.ok() && !result->warning.empty() && result->hosts == *judge.last_good());
    }
  }
  return 0;
}

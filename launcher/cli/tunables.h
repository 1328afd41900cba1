// File: launcher/cli/tunables.h
//
// The runtime parameters chorusrun hands to its workers (horovodrun's tunable, autotune,
// timeline, stall check, library and logging arguments), each described once, in one row:
// the field of LaunchOptions it fills, its flag (a boolean's pair of flags) and help text, its
// keys in the config file, the variable the workers read, and the values it accepts. The
// command line (args.cc), the config file (config_file.cc), the checks of the values and the
// workers' environment (worker_env.cc) are all made from the rows, so a new parameter is a
// row here, its field in options.h and its variable in base/config_names.h (read by
// runtime/config.cc).
//
// Thread-safety: constants.
#ifndef CHORUS_LAUNCHER_CLI_TUNABLES_H_
#define CHORUS_LAUNCHER_CLI_TUNABLES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include "launcher/options.h"

namespace chorus::launcher {

struct Tunable {
  // The field of LaunchOptions the parameter fills; unset: not given.
  using Field =
      std::variant<std::optional<int> LaunchOptions::*, std::optional<int64_t> LaunchOptions::*,
                   std::optional<double> LaunchOptions::*, std::optional<bool> LaunchOptions::*,
                   std::optional<std::string> LaunchOptions::*>;
  // A key of the config file (horovodrun's layout: `section: {key: value}`); `inverted`: the
  // key says the opposite of the field (stall_check.enabled fills no_stall_check).
  struct ConfigKey {
    const char* section;
    const char* key;
    bool inverted = false;
  };
  // How the value becomes the worker's variable.
  enum class Export {
    kAsIs,
    kMebibytesToBytes,  // --fusion-threshold-mb 64 -> 67108864
    kInverted,          // a boolean the variable states the other way round
    kWithTimeline,      // as is, and only when a timeline file is given too
  };
  // The numbers a numeric parameter accepts, [low, high] (`low_open`: (low, high]), and how the
  // error message says so. NaN is never accepted.
  struct Range {
    double low;
    double high;
    bool low_open;
    const char* accepted;
  };

  Field field;
  const char* flag;                // "--cycle-time-ms"; a boolean pair's flag that sets true
  const char* off_flag = nullptr;  // a boolean pair's flag that sets false; null: an option
  const char* help = "";
  std::vector<ConfigKey> config_keys;
  const char* variable = nullptr;  // the workers' variable; null: none
  Export export_as = Export::kAsIs;
  std::optional<Range> range = std::nullopt;
  // A string parameter's own check, which may also normalise it (--log-level's case).
  absl::Status (*check_text)(const char* flag, std::string* value) = nullptr;
  // Set to true: refused with this reason (a parameter chorus cannot honour).
  const char* refused_when_true = nullptr;
};

// OK when `ok`; else InvalidArgument "<flag>=<value> is out of range: expected <accepted>", the
// one wording of every range check of chorusrun's values.
absl::Status CheckRange(bool ok, absl::string_view flag, absl::string_view value,
                        absl::string_view accepted);

// Every parameter, in the order of chorusrun --help.
const std::vector<Tunable>& Tunables();

// The values given in `options`: each in its range, each string passing its check (and
// normalised by it), none refused. InvalidArgument naming the flag and the value otherwise.
absl::Status CheckTunables(LaunchOptions* options);

// The workers' variables of the parameters given in `options`, in the table's order.
std::vector<std::pair<std::string, std::string>> TunableVariables(const LaunchOptions& options);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_CLI_TUNABLES_H_

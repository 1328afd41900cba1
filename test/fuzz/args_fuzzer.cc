// Fuzzes chorusrun's command line (launcher/cli/args.h): ParseCommandLine over fuzzed argv, with a
// --config-file whose YAML comes from the input too, and ShellSplit (how --mpi-args and
// --binding-args are split) over every argument.
//
// Input: one flag byte, then the arguments separated by NUL bytes (argv cannot hold a NUL). With
// flag bit 0 the last part is not an argument but the contents of a config file, and an argument
// "@CONFIG@" (alone or after "=") stands for its path. Arguments naming /dev, /proc or /sys are
// skipped: chorusrun would read them as a config file.
//
// Properties: no crash and no exception out of the parser; errors are InvalidArgument,
// Unimplemented (--jsrun) or NotFound (an unreadable config file), in one line unless the input
// itself holds a newline; an accepted command line to run has a command, -np >= 1, elastic flags
// only with --gloo, and every tunable within the range the flag documents. ShellSplit reads back
// words quoted for a shell as the same words.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "launcher/cli/args.h"
#include "launcher/process/shell_words.h"
#include "test/fuzz/fuzz_check.h"

namespace chorus::launcher {
namespace {

// A file of this process for the config file's contents, removed at exit.
const std::string& ConfigPath() {
  static const std::string* path = [] {
    char name[] = "/tmp/chorus_args_fuzzer_XXXXXX";
    const int fd = mkstemp(name);
    FUZZ_CHECK(fd >= 0) << "mkstemp";
    close(fd);
    static std::string kept(name);
    atexit([] { unlink(kept.c_str()); });
    return new std::string(name);
  }();
  return *path;
}

std::string ShellQuote(const std::string& word) {
  return "'" + absl::StrReplaceAll(word, {{"'", "'\\''"}}) + "'";
}

void CheckShellSplit(const std::string& text) {
  absl::StatusOr<std::vector<std::string>> words = ShellSplit(text);
  if (!words.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(words.status())) << words.status();
    return;
  }
  std::string quoted;
  for (const std::string& w : *words) quoted += ShellQuote(w) + " ";
  absl::StatusOr<std::vector<std::string>> again = ShellSplit(quoted);
  FUZZ_CHECK(again.ok() && *again == *words) << "quoted words do not split back: " << quoted;
}

void CheckAccepted(const LaunchOptions& o) {
  FUZZ_CHECK(o.num_proc >= 1) << o.num_proc;
  FUZZ_CHECK(!o.command.empty());
  FUZZ_CHECK(!o.is_elastic || o.gloo) << "elastic without --gloo";
  if (o.fusion_threshold_mb) FUZZ_CHECK(*o.fusion_threshold_mb >= 0);
  if (o.cycle_time_ms) FUZZ_CHECK(std::isfinite(*o.cycle_time_ms) && *o.cycle_time_ms > 0);
  if (o.cache_capacity) FUZZ_CHECK(*o.cache_capacity >= 0 && *o.cache_capacity <= (1 << 20));
  if (o.start_timeout_s) FUZZ_CHECK(*o.start_timeout_s >= 1);
  if (o.ssh_port) FUZZ_CHECK(*o.ssh_port >= 1 && *o.ssh_port <= 65535);
  if (o.autotune_gaussian_process_noise) {
    FUZZ_CHECK(*o.autotune_gaussian_process_noise >= 0 && *o.autotune_gaussian_process_noise <= 1);
  }
  for (const std::optional<int>* v :
       {&o.autotune_warmup_samples, &o.autotune_steps_per_sample, &o.autotune_bayes_opt_max_samples,
        &o.stall_check_warning_time_seconds, &o.stall_check_shutdown_time_seconds,
        &o.num_nccl_streams, &o.gloo_timeout_seconds}) {
    if (*v) FUZZ_CHECK(**v >= 0) << **v;
  }
  if (o.thread_affinity) {
    for (absl::string_view core : absl::StrSplit(*o.thread_affinity, ',')) {
      int id = -1;
      FUZZ_CHECK(absl::SimpleAtoi(core, &id) && id >= 0) << *o.thread_affinity;
    }
  }
  if (o.log_level) {
    FUZZ_CHECK(*o.log_level == "trace" || *o.log_level == "debug" || *o.log_level == "info" ||
               *o.log_level == "warning" || *o.log_level == "error" || *o.log_level == "fatal")
        << *o.log_level;
  }
  if (o.is_elastic) {
    const LaunchOptions::Elastic& e = o.elastic;
    for (const std::optional<int>* v :
         {&e.min_np, &e.max_np, &e.slots_per_host, &e.elastic_timeout_s}) {
      if (*v) FUZZ_CHECK(**v >= 1) << **v;
    }
    if (e.reset_limit) FUZZ_CHECK(*e.reset_limit >= 0);
    if (e.min_np) FUZZ_CHECK(*e.min_np <= o.num_proc);
    if (e.max_np) FUZZ_CHECK(o.num_proc <= *e.max_np);
    if (e.blacklist_cooldown_s) {
      FUZZ_CHECK(e.blacklist_cooldown_s->first >= 1 &&
                 e.blacklist_cooldown_s->first <= e.blacklist_cooldown_s->second);
    }
    if (e.discovery_script) FUZZ_CHECK(!e.discovery_script->empty() && !o.hosts && !o.hostfile);
  }
}

}  // namespace
}  // namespace chorus::launcher

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::launcher;
  if (size < 1) return 0;
  const bool with_config = data[0] & 1;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> args = absl::StrSplit(rest, '\0');
  std::string config;
  if (with_config) {
    config = args.back();
    args.pop_back();
    FILE* f = fopen(ConfigPath().c_str(), "w");
    FUZZ_CHECK(f != nullptr);
    FUZZ_CHECK(fwrite(config.data(), 1, config.size(), f) == config.size());
    fclose(f);
  }
  bool newline = config.find('\n') != std::string::npos;
  for (std::string& arg : args) {
    for (absl::string_view system : {"/dev", "/proc", "/sys"}) {
      if (absl::StrContains(arg, system)) return 0;
    }
    absl::StrReplaceAll({{"@CONFIG@", ConfigPath()}}, &arg);
    newline = newline || arg.find('\n') != std::string::npos;
    CheckShellSplit(arg);
  }

  absl::StatusOr<CommandLine> parsed = ParseCommandLine(args);
  if (!parsed.ok()) {
    const absl::Status& s = parsed.status();
    FUZZ_CHECK(absl::IsInvalidArgument(s) || absl::IsUnimplemented(s) || absl::IsNotFound(s)) << s;
    FUZZ_CHECK(newline || s.message().find('\n') == absl::string_view::npos)
        << "a message of several lines: " << s;
    return 0;
  }
  switch (parsed->action) {
    case CommandLine::Action::kRun:
      CheckAccepted(parsed->options);
      break;
    case CommandLine::Action::kHelp:
      FUZZ_CHECK(!parsed->help_text.empty());
      break;
    default:
      break;
  }
  return 0;
}

#include "launcher/cli/args.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

#include "launcher/cli/config_file.h"
#include "launcher/cli/tunables.h"
#include <CLI/CLI.hpp>

namespace chorus::launcher {
namespace {

// Horovod's single-dash long names and the names CLI11 knows them by.
const std::map<std::string, std::string>& SingleDashAliases() {
  static const auto* aliases = new std::map<std::string, std::string>{
      {"-np", "--num-proc"},
      {"-cb", "--check-build"},
      {"-hostfile", "--hostfile"},
      {"-prefix-timestamp", "--prefix-output-with-timestamp"},
  };
  return *aliases;
}

// The flag definitions, bound to the variables they fill. `commits` copy given values into the
// optionals of LaunchOptions after a successful parse.
class Definitions {
 public:
  explicit Definitions(LaunchOptions* o) : o_(o) {
    app_.set_help_flag("-h,--help", "Show this help message and exit.");
    app_.add_flag("-v,--version", version_, "Shows chorus version.");
    num_proc_ =
        app_.add_option("-n,--num-proc", o->num_proc, "Total number of training processes.");
    app_.add_flag("--check-build", check_build_,
                  "Shows which frameworks and libraries have been built into chorus.");
    app_.add_flag("--disable-cache", disable_cache_,
                  "Run the initialization checks (ssh to every host) on every launch: chorusrun "
                  "always does, it keeps no cache of them.");
    Optional("--start-timeout", &o->start_timeout_s,
             "Seconds for the start (default: 30, or HOROVOD_START_TIMEOUT). --gloo: each ssh "
             "host check and connection, and how long workers wait for every rank to join.");
    app_.add_option("--network-interfaces", nics_,
                    "Comma-separated network interfaces to use for communication: NCCL's "
                    "sockets; MPI mode: Open MPI's TCP transport; --gloo: UCX's network "
                    "devices and the rendezvous address remote workers dial.")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->allow_extra_args(false);
    app_.add_option("--network-interface", nic_,
                    "A network interface to use for communication (as --network-interfaces); "
                    "may be repeated.")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->allow_extra_args(false);
    Optional("--output-filename", &o->output_filename,
             "Directory for each rank's stdout/stderr. MPI mode: passed to mpirun's "
             "--output-filename. --gloo: written to DIR/rank.<r>/stdout and DIR/rank.<r>/stderr "
             "instead of the terminal (elastic: appended to by whoever holds rank r in each "
             "generation).");
    app_.add_flag("--verbose", o->verbose,
                  "Print extra messages, including the mpirun command (--gloo: each worker's "
                  "command and the rendezvous address).");
    Optional("--config-file", &o->config_file,
             "YAML file of runtime parameters; flags given on the command line win over it.");

    Optional("-p,--ssh-port", &o->ssh_port, "SSH port on all the hosts.");
    Optional("-i,--ssh-identity-file", &o->ssh_identity_file,
             "File on the driver from which the identity (private key) is read.");

    // The runtime's parameters (launcher/cli/tunables.h).
    for (const Tunable& t : Tunables()) {
      std::visit(
          [&](auto member) {
            auto* out = &(o->*member);
            using T = typename std::decay_t<decltype(*out)>::value_type;
            if constexpr (std::is_same_v<T, bool>) {
              BoolPair(t.flag, t.off_flag, out, t.help);
            } else {
              Optional(t.flag, out, t.help);
            }
          },
          t.field);
    }

    Elastic("--min-np,--min-num-proc", &o->elastic.min_np,
            "Minimum number of processes (elastic; default: -np).");
    Elastic("--max-np,--max-num-proc", &o->elastic.max_np,
            "Maximum number of processes (elastic; default: every discovered slot).");
    Elastic("--slots-per-host,--slots", &o->elastic.slots_per_host,
            "Slots of a discovered host that names none (elastic; default: 1).");
    Elastic("--elastic-timeout", &o->elastic.elastic_timeout_s,
            "Seconds to wait for --min-np slots (elastic; default: HOROVOD_ELASTIC_TIMEOUT, "
            "else 600).");
    Elastic("--reset-limit", &o->elastic.reset_limit,
            "Maximum number of resets; the next one ends the job (elastic; default: none).");
    Elastic("--host-discovery-script", &o->elastic.discovery_script,
            "Script printing the available hosts, one 'host[:slots]' per line (elastic).");
    elastic_.push_back(app_.add_option("--blacklist-cooldown-range", cooldown_,
                                       "Seconds (min, max) a failing host stays blacklisted.")
                           ->expected(2)
                           ->allow_extra_args(false));

    Optional("--mpi-args", &o->mpi_args, "Extra arguments for mpirun, e.g. --mpi-args=\"...\".");
    app_.add_flag("--tcp", o->tcp, "Use only TCP for communication.");
    Optional("--binding-args", &o->binding_args,
             "Process binding arguments (default: -bind-to none -map-by slot).");

    app_.add_flag("--prefix-output-with-timestamp", o->prefix_output_with_timestamp,
                  "Timestamp each line of output.");

    CLI::Option* hosts =
        Optional("-H,--hosts", &o->hosts, "host:slots,... (default: localhost:np).");
    CLI::Option* hostfile = Optional("--hostfile", &o->hostfile, "File of 'host slots=N' lines.");
    hosts->excludes(hostfile);

    CLI::Option* gloo = app_.add_flag(
        "--gloo", o->gloo,
        "MPI-less mode, the UCX launch (horovodrun's name for it; no Gloo is involved): "
        "chorusrun starts the workers itself (locally, or over ssh) and they connect over UCX. "
        "Without -H/--hostfile the hosts come from a Slurm allocation "
        "(SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE) when there is one.");
    CLI::Option* mpi = app_.add_flag("--mpi", mpi_, "Run with the MPI controller (default).");
    CLI::Option* jsrun = app_.add_flag("--jsrun", jsrun_, "Launch with jsrun (not supported).");
    gloo->excludes(mpi)->excludes(jsrun);
    mpi->excludes(jsrun);
  }

  CLI::App& app() { return app_; }
  bool mpi_given() const { return mpi_; }

  // The status of the parsed values: range checks and the unsupported modes.
  absl::StatusOr<CommandLine::Action> Finish() {
    for (auto& commit : commits_) commit();
    if (version_) return CommandLine::Action::kVersion;
    if (check_build_) return CommandLine::Action::kCheckBuild;
    for (CLI::Option* opt : elastic_) o_->is_elastic = o_->is_elastic || opt->count() > 0;
    if (cooldown_.size() == 2) o_->elastic.blacklist_cooldown_s = {cooldown_[0], cooldown_[1]};
    if (o_->is_elastic) {
      if (mpi_) {
        return absl::InvalidArgumentError(
            "elastic training needs the MPI-less mode (--gloo): Open MPI 4.1 cannot resize a "
            "world, so --mpi cannot be used with the elastic flags");
      }
      o_->gloo = true;
    }
    if (o_->gloo) {
      for (const char* flag : {"--mpi-args", "--binding-args"}) {
        if (const CLI::Option* opt = app_.get_option_no_throw(flag);
            opt != nullptr && opt->count() > 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(flag, " is for mpirun and has no effect with --gloo"));
        }
      }
    }
    if (jsrun_) return absl::UnimplementedError("--jsrun is not supported; run with --mpi");
    for (const std::string& list : nics_) AddNics(list);
    for (const std::string& nic : nic_) AddNics(nic);
    return CommandLine::Action::kRun;
  }

  bool num_proc_given() const { return num_proc_->count() > 0; }

 private:
  template <typename T>
  CLI::Option* Optional(const std::string& names, std::optional<T>* out, const std::string& help) {
    auto value = std::make_shared<T>();
    CLI::Option* opt = app_.add_option(names, *value, help)->allow_extra_args(false);
    commits_.push_back([opt, value, out] {
      if (opt->count() > 0) *out = *value;
    });
    return opt;
  }

  void BoolPair(const std::string& on, const std::string& off, std::optional<bool>* out,
                const std::string& help) {
    CLI::Option* yes = app_.add_flag(on, help);
    const std::string undo = absl::StrCat("Undo ", on, ".");
    CLI::Option* no = app_.add_flag(off, undo);
    yes->excludes(no);
    commits_.push_back([yes, no, out] {
      if (yes->count() > 0) *out = true;
      if (no->count() > 0) *out = false;
    });
  }

  template <typename T>
  void Elastic(const std::string& names, std::optional<T>* out, const std::string& help) {
    elastic_.push_back(Optional(names, out, help));
  }

  void AddNics(const std::string& list) {
    for (absl::string_view nic : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
      std::string name(absl::StripAsciiWhitespace(nic));
      bool seen = false;
      for (const std::string& n : o_->network_interfaces) seen = seen || n == name;
      if (!seen) o_->network_interfaces.push_back(std::move(name));
    }
  }

  LaunchOptions* o_;
  CLI::App app_{"chorusrun: launches a chorus job (horovodrun-compatible)", "chorusrun"};
  CLI::Option* num_proc_ = nullptr;
  bool version_ = false;
  bool check_build_ = false;
  bool disable_cache_ = false;
  bool mpi_ = false;
  bool jsrun_ = false;
  std::vector<std::string> nics_;
  std::vector<std::string> nic_;
  std::vector<int> cooldown_;
  std::vector<CLI::Option*> elastic_;
  std::vector<std::function<void()>> commits_;
};

template <typename T>
absl::Status NonNegative(const std::optional<T>& v, absl::string_view flag) {
  if (!v) return absl::OkStatus();
  return CheckRange(*v >= 0, flag, absl::StrCat(*v), "a value >= 0");
}

// The elastic flags: each value in range, and min <= np <= max, MIN <= MAX.
absl::Status ValidateElastic(const LaunchOptions& o) {
  const LaunchOptions::Elastic& e = o.elastic;
  if (!o.is_elastic) return absl::OkStatus();
  const std::pair<const std::optional<int>*, const char*> positive[] = {
      {&e.min_np, "--min-np"},
      {&e.max_np, "--max-np"},
      {&e.slots_per_host, "--slots-per-host"},
      {&e.elastic_timeout_s, "--elastic-timeout"},
  };
  for (const auto& [value, flag] : positive) {
    if (*value && **value < 1) {
      return CheckRange(false, flag, absl::StrCat(**value), "a value >= 1");
    }
  }
  if (absl::Status s = NonNegative(e.reset_limit, "--reset-limit"); !s.ok()) return s;
  if (e.min_np && *e.min_np > o.num_proc) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min-np=", *e.min_np, " is larger than -np=", o.num_proc));
  }
  if (e.max_np && o.num_proc > *e.max_np) {
    return absl::InvalidArgumentError(
        absl::StrCat("-np=", o.num_proc, " is larger than --max-np=", *e.max_np));
  }
  if (e.blacklist_cooldown_s) {
    const auto [min, max] = *e.blacklist_cooldown_s;
    if (min < 1 || max < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--blacklist-cooldown-range ", min, " ", max,
                                                     ": both values must be seconds >= 1"));
    }
    if (min > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("--blacklist-cooldown-range ", min, " ", max, ": MIN is larger than MAX"));
    }
  }
  if (e.discovery_script && e.discovery_script->empty()) {
    return absl::InvalidArgumentError("--host-discovery-script is empty");
  }
  if (e.discovery_script && (o.hosts || o.hostfile)) {
    return absl::InvalidArgumentError(
        "--host-discovery-script and -H/--hostfile exclude each other: the script names the "
        "hosts");
  }
  return absl::OkStatus();
}

// chorusrun's own values and the elastic flags; the runtime's parameters are checked by
// CheckTunables (launcher/cli/tunables.h).
absl::Status Validate(const LaunchOptions& o) {
  if (absl::Status s = CheckRange(o.num_proc >= 1, "-np", absl::StrCat(o.num_proc), ">= 1");
      !s.ok()) {
    return s;
  }
  if (o.start_timeout_s) {
    if (absl::Status s = CheckRange(*o.start_timeout_s >= 1, "--start-timeout",
                                    absl::StrCat(*o.start_timeout_s), "seconds >= 1");
        !s.ok()) {
      return s;
    }
  }
  if (o.ssh_port) {
    if (absl::Status s = CheckRange(*o.ssh_port >= 1 && *o.ssh_port <= 65535, "--ssh-port",
                                    absl::StrCat(*o.ssh_port), "[1, 65535]");
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ValidateElastic(o); !s.ok()) return s;
  if (o.command.empty()) {
    return absl::InvalidArgumentError(
        "no command given; usage: chorusrun -np N [options] COMMAND [ARGS...]");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine result;
  Definitions defs(&result.options);
  CLI::App& app = defs.app();

  // Split chorusrun's flags from the command, joining "--flag value" into "--flag=value" so that
  // values which look like flags (--mpi-args "-mca ...") reach CLI11 intact.
  std::vector<std::string> own;
  size_t i = 0;
  while (i < args.size()) {
    std::string token = args[i];
    if (token == "--") {
      ++i;
      break;
    }
    if (token.size() < 2 || token[0] != '-') break;
    const size_t eq = token.find('=');
    std::string name = token.substr(0, eq);
    if (auto it = SingleDashAliases().find(name); it != SingleDashAliases().end()) {
      name = it->second;
      token = eq == std::string::npos ? name : name + token.substr(eq);
    }
    const bool is_long = absl::StartsWith(name, "--");
    const bool attached = eq != std::string::npos || (!is_long && token.size() > 2);
    CLI::Option* opt = app.get_option_no_throw(is_long ? name : token.substr(0, 2));
    if (opt == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unrecognized argument '", token, "' (see chorusrun --help)"));
    }
    ++i;
    const int expected = attached ? 0 : opt->get_items_expected_max();
    if (expected == 1 && i < args.size()) {
      token = absl::StrCat(is_long ? name : token, is_long ? "=" : "", args[i]);
      ++i;
    } else {
      own.push_back(token);
      for (int k = 0; k < expected && i < args.size(); ++k) own.push_back(args[i++]);
      continue;
    }
    own.push_back(token);
  }
  result.options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());

  std::vector<std::string> reversed(own.rbegin(), own.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    result.action = CommandLine::Action::kHelp;
    result.help_text = app.help();
    return result;
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    absl::StrReplaceAll({{"\n", " "}}, &message);
    return absl::InvalidArgumentError(message);
  }

  absl::StatusOr<CommandLine::Action> action = defs.Finish();
  if (!action.ok()) return action.status();
  result.action = *action;
  if (result.action != CommandLine::Action::kRun) return result;
  if (result.options.config_file) {
    if (absl::Status s = ApplyConfigFile(*result.options.config_file, &result.options); !s.ok()) {
      return s;
    }
    if (defs.mpi_given()) result.options.gloo = false;  // the command line wins
    if (result.options.is_elastic) result.options.gloo = true;
  }
  if (!defs.num_proc_given()) {
    return absl::InvalidArgumentError("-np/--num-proc is required (see chorusrun --help)");
  }
  if (absl::Status s = CheckTunables(&result.options); !s.ok()) return s;
  if (absl::Status s = Validate(result.options); !s.ok()) return s;
  return result;
}

}  // namespace chorus::launcher

#include "launcher/cli/config_file.h"

#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

#include "launcher/cli/tunables.h"
#include <yaml-cpp/yaml.h>

namespace chorus::launcher {
namespace {

// YAML text (a key, a value) as an error message shows it: on one line, with C escapes.
std::string Shown(absl::string_view text) { return absl::CHexEscape(text); }

// yaml-cpp's own message, which may quote the text it stopped at, on one line.
std::string OneLine(const std::string& message) {
  return absl::StrReplaceAll(message, {{"\n", "\\n"}, {"\r", "\\r"}});
}

// Reads one scalar into an unset optional. yaml-cpp reports type errors by throwing; the throw
// stays inside this function.
template <typename T>
absl::Status Fill(const YAML::Node& node, const std::string& where, std::optional<T>* out) {
  if (out->has_value() || node.IsNull()) return absl::OkStatus();
  if (!node.IsScalar()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected a single value"));
  }
  try {
    *out = node.as<T>();
  } catch (const YAML::Exception&) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": cannot read '", Shown(node.Scalar()), "' as the expected type"));
  }
  return absl::OkStatus();
}

using KeyHandler = std::function<absl::Status(const YAML::Node&, const std::string&)>;

absl::Status ApplySection(const YAML::Node& section, const std::string& where,
                          const std::map<std::string, KeyHandler>& keys) {
  if (section.IsNull()) return absl::OkStatus();
  if (!section.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected a map"));
  for (const auto& entry : section) {
    const std::string key = entry.first.as<std::string>();
    const std::string key_where = absl::StrCat(where, ".", Shown(key));
    auto it = keys.find(key);
    if (it == keys.end()) {
      return absl::InvalidArgumentError(absl::StrCat(key_where, ": unknown key"));
    }
    if (absl::Status s = it->second(entry.second, key_where); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The handler of a parameter's key: fills its field (inverted: with the opposite value).
KeyHandler Into(const Tunable::Field& field, bool inverted, LaunchOptions* o) {
  return std::visit(
      [o, inverted](auto member) -> KeyHandler {
        auto* out = &(o->*member);
        using T = typename std::decay_t<decltype(*out)>::value_type;
        if constexpr (std::is_same_v<T, bool>) {
          if (inverted) {
            return [out](const YAML::Node& node, const std::string& where) {
              std::optional<bool> value;
              if (absl::Status s = Fill(node, where, &value); !s.ok()) return s;
              if (value && !out->has_value()) *out = !*value;
              return absl::OkStatus();
            };
          }
        }
        return [out](const YAML::Node& node, const std::string& where) {
          return Fill(node, where, out);
        };
      },
      field);
}

absl::Status Apply(const YAML::Node& root, const std::string& file, LaunchOptions* o) {
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(file, ": expected a map"));
  // Every parameter's keys (launcher/cli/tunables.h), by section.
  std::map<std::string, std::map<std::string, KeyHandler>> sections;
  for (const Tunable& t : Tunables()) {
    for (const Tunable::ConfigKey& key : t.config_keys) {
      sections[key.section][key.key] = Into(t.field, key.inverted, o);
    }
  }
  // Horovod 0.21 renamed it thread_affinity; Horovod 0.28.1 no longer reads it.
  sections["library_options"]["ccl_bgt_affinity"] = [](const YAML::Node&,
                                                       const std::string& where) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": renamed thread_affinity in horovodrun's config file (the cores of the "
                     "background threads, --thread-affinity); chorus has no oneCCL"));
  };
  for (const auto& entry : root) {
    const std::string name = entry.first.as<std::string>();
    const std::string where = absl::StrCat(file, ": ", Shown(name));
    if (name == "controller") {
      std::optional<std::string> controller;
      if (absl::Status s = Fill(entry.second, where, &controller); !s.ok()) return s;
      const std::string lower = absl::AsciiStrToLower(controller.value_or("mpi"));
      if (lower != "mpi" && lower != "gloo") {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": no such controller '", Shown(*controller), "' (expected mpi or gloo)"));
      }
      // gloo: chorus's MPI-less mode (UCX). A --mpi on the command line wins (args.cc).
      if (lower == "gloo") o->gloo = true;
      continue;
    }
    auto it = sections.find(name);
    if (it == sections.end()) {
      // A flat key (fusion_threshold_mb: 32): say which section horovodrun's layout puts it in.
      for (const auto& [section, keys] : sections) {
        if (keys.contains(name)) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": unknown section; horovodrun's config file layout puts this key under '",
              section, ":' (", section, ": {", name, ": ...})"));
        }
      }
      std::vector<std::string> names = {"controller"};
      for (const auto& [section, keys] : sections) names.push_back(section);
      return absl::InvalidArgumentError(absl::StrCat(where, ": unknown section (expected one of ",
                                                     absl::StrJoin(names, ", "), ")"));
    }
    if (absl::Status s = ApplySection(entry.second, where, it->second); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyConfigYaml(const std::string& text, const std::string& file_name,
                             LaunchOptions* options) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": not valid YAML: line ", e.mark.line + 1, ": ", OneLine(e.msg)));
  }
  try {
    return Apply(root, file_name, options);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": ", OneLine(e.msg)));
  }
}

absl::Status ApplyConfigFile(const std::string& path, LaunchOptions* options) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --config-file '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ApplyConfigYaml(buffer.str(), path, options);
}

}  // namespace chorus::launcher

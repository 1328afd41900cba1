// The documents say what the code does: docs/configuration.md's table of variables against the
// variables runtime/config.cc reads (Config::Variables): every row names a variable the runtime
// reads, with exactly its Horovod aliases and its default; every variable the runtime reads is
// in that table or, for the worker's place chorusrun sets, in launcher/README.md.
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include <catch2/catch.hpp>

#include "runtime/config.h"

namespace chorus::runtime {
namespace {

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(CHORUS_SOURCE_DIR) + "/" + relative);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Row {
  std::vector<std::string> names;    // the CHORUS_* names of the first cell
  std::vector<std::string> aliases;  // the HOROVOD_* names of the first cell
  std::vector<std::string> defaults;
};

std::vector<std::string> Backticked(const std::string& cell, const std::string& prefix) {
  std::vector<std::string> out;
  static const std::regex kCode("`([A-Z0-9_]+)`");
  for (std::sregex_iterator it(cell.begin(), cell.end(), kCode), end; it != end; ++it) {
    const std::string name = (*it)[1];
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

// The rows of the table whose first cell names a CHORUS_* variable.
std::vector<Row> TableRows(const std::string& markdown) {
  std::vector<Row> rows;
  for (absl::string_view line : absl::StrSplit(markdown, '\n')) {
    if (!absl::StartsWith(line, "| `CHORUS_")) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    REQUIRE(cells.size() >= 4);
    Row row{Backticked(cells[1], "CHORUS_"), Backticked(cells[1], "HOROVOD_"), {}};
    for (absl::string_view value : absl::StrSplit(cells[2], ',')) {
      row.defaults.emplace_back(absl::StripAsciiWhitespace(value));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

TEST_CASE("docs/configuration.md's table matches the variables the runtime reads", "[config]") {
  std::map<std::string, Config::VariableInfo> variables;
  for (Config::VariableInfo& v : Config::Variables()) variables[v.name] = std::move(v);
  const std::vector<Row> rows = TableRows(ReadSource("docs/configuration.md"));
  REQUIRE(rows.size() > 20);
  std::map<std::string, bool> documented;
  for (const Row& row : rows) {
    INFO("row of " << row.names.front());
    // One default per variable of the row ("0, 0" for a row of two).
    REQUIRE(row.defaults.size() == row.names.size());
    std::vector<std::string> aliases;
    for (size_t i = 0; i < row.names.size(); ++i) {
      const auto it = variables.find(row.names[i]);
      INFO(row.names[i]);
      REQUIRE(it != variables.end());  // a variable the runtime reads
      documented[row.names[i]] = true;
      const std::string& want = it->second.default_value;
      CHECK(row.defaults[i] == (want.empty() ? "(none)" : want));
      aliases.insert(aliases.end(), it->second.aliases.begin(), it->second.aliases.end());
    }
    // The HOROVOD_* names of the first cell are exactly the aliases (a chorusrun flag named
    // there is not one).
    CHECK(row.aliases == aliases);
  }
  const std::string launcher = ReadSource("launcher/README.md");
  for (const auto& [name, info] : variables) {
    INFO(name << ": documented in neither docs/configuration.md nor launcher/README.md");
    CHECK((documented.count(name) > 0 || launcher.find("`" + name + "`") != std::string::npos ||
           launcher.find("`" + name + "=") != std::string::npos));
  }
}

}  // namespace
}  // namespace chorus::runtime

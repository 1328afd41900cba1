#include "launcher/process/executable_search.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

// A scratch directory with an executable "tool" and a non-executable "data".
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/chorus_exec_search_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    Write("tool", 0755);
    Write("data", 0644);
  }
  ~ScratchDir() {
    ::unlink((dir_ + "/tool").c_str());
    ::unlink((dir_ + "/data").c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return dir_; }

 private:
  void Write(const std::string& name, mode_t mode) {
    const std::string file = dir_ + "/" + name;
    std::ofstream(file) << "#!/bin/sh\n";
    ::chmod(file.c_str(), mode);
  }
  std::string dir_;
};

TEST_CASE("Names without '/' are searched in PATH order", "[launcher][exec]") {
  ScratchDir dir;
  auto found = FindExecutable("tool", "/nonexistent:" + dir.path() + ":/usr/bin");
  REQUIRE(found.ok());
  CHECK(*found == dir.path() + "/tool");
  auto sh = FindExecutable("sh", "/nonexistent:/bin");
  REQUIRE(sh.ok());
  CHECK(*sh == "/bin/sh");
}

TEST_CASE("Missing and non-executable commands are NotFound", "[launcher][exec]") {
  ScratchDir dir;
  auto missing = FindExecutable("no_such_tool_xyz", dir.path());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()),
             Catch::Contains("'no_such_tool_xyz' not found in PATH"));
  auto data = FindExecutable("data", dir.path());
  REQUIRE_FALSE(data.ok());
  CHECK_THAT(std::string(data.status().message()), Catch::Contains("is not executable"));
  CHECK_FALSE(FindExecutable("", "/bin").ok());
}

TEST_CASE("Names with '/' are used as they are", "[launcher][exec]") {
  ScratchDir dir;
  CHECK(FindExecutable(dir.path() + "/tool", "").value() == dir.path() + "/tool");
  CHECK_FALSE(FindExecutable(dir.path() + "/data", "/bin").ok());
  auto gone = FindExecutable(dir.path() + "/gone", "/bin");
  REQUIRE_FALSE(gone.ok());
  CHECK_THAT(std::string(gone.status().message()), Catch::Contains("does not exist"));
  // A directory is not a command.
  CHECK_FALSE(FindExecutable(dir.path(), "/bin").ok());
}

}  // namespace
}  // namespace chorus::launcher

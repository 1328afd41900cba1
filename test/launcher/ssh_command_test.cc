#include "launcher/hosts/ssh_command.h"

#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include <catch2/catch.hpp>

#include "launcher/cli/args.h"
#include "launcher/process/shell_words.h"

namespace chorus::launcher {
namespace {

using Args = std::vector<std::string>;

TEST_CASE("The ssh check is ssh -o BatchMode=yes -o ConnectTimeout=T HOST true",
          "[launcher][ssh]") {
  SshOptions o;
  o.connect_timeout_s = 30;
  CHECK(SshCheckArgv(o, "node1") ==
        Args{"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=30", "node1", "true"});
  o.ssh = "/usr/bin/ssh";
  o.port = 2222;
  o.identity_file = "/home/u/.ssh/id key";
  o.connect_timeout_s = 5;
  CHECK(SshCheckArgv(o, "10.0.0.2") == Args{"/usr/bin/ssh", "-o", "BatchMode=yes", "-o",
                                            "ConnectTimeout=5", "-p", "2222", "-i",
                                            "/home/u/.ssh/id key", "10.0.0.2", "true"});
}

TEST_CASE("A remote worker is ssh ... HOST SCRIPT", "[launcher][ssh]") {
  SshOptions o;
  o.port = 22;
  CHECK(SshWorkerArgv(o, "n2", "cd / && true") == Args{"ssh", "-o", "BatchMode=yes", "-o",
                                                       "ConnectTimeout=30", "-p", "22", "n2",
                                                       "cd / && true"});
}

TEST_CASE("The remote script: cd, the variables from stdin, the command, the watcher",
          "[launcher][ssh]") {
  const std::string script =
      RemoteWorkerScript("/work/my dir", {"python3", "train.py", "--lr", "0.1"}, 3);
  CHECK(script ==
        "cd '/work/my dir' || exit 1; "
        "IFS= read -r e || exit 1; nl=$(printf '\\n_'); nl=${nl%_}; "
        "exec 3<&0; "
        "(eval \"set -- $e\"; unset e nl; while [ $# -gt 0 ]; do export \"$1\"; shift; done; "
        "exec python3 train.py --lr 0.1) </dev/null 3<&- & w=$!; unset e; "
        "{ while IFS= read -r _ <&3; do :; done; kill -TERM $w; sleep 3 3<&-; kill -KILL $w; } "
        ">/dev/null 2>&1 & g=$!; "
        "exec 3<&-; wait $w; s=$?; kill $g 2>/dev/null; exit $s");
}

TEST_CASE("Every word of the remote command is quoted for sh", "[launcher][ssh]") {
  const Args command = {"/bin/sh", "-c", "echo \"$HOME\" it's; ls *", "a b", "", "x\ny"};
  const std::string script = RemoteWorkerScript("/tmp/it's here", command, 3);
  CHECK_THAT(script, Catch::StartsWith("cd '/tmp/it'\\''s here' || exit 1; "));
  // The worker's part reads back, as sh would split it, into exactly the words given.
  const std::string start = "done; exec ";
  const std::string end = ") </dev/null 3<&- & w=$!;";
  const size_t from = script.find(start) + start.size();
  const size_t to = script.find(end);
  REQUIRE(to != std::string::npos);
  absl::StatusOr<Args> words = ShellSplit(script.substr(from, to - from));
  REQUIRE(words.ok());
  CHECK(*words == command);
}

TEST_CASE("The variables' line: one sh word per variable, a newline only at its end",
          "[launcher][ssh]") {
  CHECK(RemoteEnvironmentLine({}) == "\n");
  CHECK(RemoteEnvironmentLine({{"A", "1"}, {"EMPTY", ""}, {"Q", "it's \"q\" $x `y` \\z"}}) ==
        "'A=1' 'EMPTY=' 'Q=it'\\''s \"q\" $x `y` \\z'\n");
  CHECK(RemoteEnvironmentLine({{"NL", "a\nb\n"}, {"EQ", "k=v=w"}, {"U", "h\xc3\xa9 \x01\t\r"}}) ==
        "'NL=a'\"$nl\"'b'\"$nl\"'' 'EQ=k=v=w' 'U=h\xc3\xa9 \x01\t\r'\n");
  // Without the "$nl" pieces the line is what ShellSplit reads back as the NAME=VALUE words.
  absl::StatusOr<Args> words = ShellSplit(absl::StrReplaceAll(
      RemoteEnvironmentLine({{"A", "x y"}, {"B", "it's\n"}}), {{"\"$nl\"", "\"|\""}, {"\n", ""}}));
  REQUIRE(words.ok());
  CHECK(*words == Args{"A=x y", "B=it's|"});
}

}  // namespace
}  // namespace chorus::launcher

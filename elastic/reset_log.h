// File: elastic/reset_log.h
//
// The one stderr line the elastic driver prints per reset:
//
//   chorusrun: generation 3: -hostB (rank 2 killed by SIGKILL) +hostC, size 4 -> 4, cause: ...
//
// "-host" for a host that had workers in the previous generation and has none now, "+host" for
// one that has workers now and had none, "host" for one that stays but whose workers' ends are
// noted; each followed by its notes in parentheses ("rank 2 exited with code 3", "rank 1 left
// after SIGTERM", "blacklisted", "gone from discovery").
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_ELASTIC_RESET_LOG_H_
#define CHORUS_ELASTIC_RESET_LOG_H_

#include <map>
#include <string>
#include <vector>

namespace chorus::elastic {

struct ResetRecord {
  int generation = 0;
  std::vector<std::string> previous_hosts;  // hosts with workers before, in rank order
  std::vector<std::string> current_hosts;   // hosts with workers now, in rank order
  std::map<std::string, std::vector<std::string>> notes;  // host -> what happened there
  int previous_size = 0;
  int current_size = 0;
  std::string cause;
};

// The line above, without a trailing newline.
std::string FormatResetLine(const ResetRecord& record);

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_RESET_LOG_H_

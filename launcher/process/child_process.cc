#include "launcher/process/child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "launcher/process/spawn.h"

namespace chorus::launcher {
namespace {

// The self-pipe's write end, for the signal handler.
volatile sig_atomic_t g_signal_fd = -1;

// Set on a signal's byte when a terminal sent it (si_code SI_KERNEL): it reached mpirun too.
constexpr unsigned char kFromTerminal = 0x80;

// Once the child has exited, a pipe that stays silent this long ends the wait for EOF (what the
// child started could hold it open), and the reading ends this long after the exit at the
// latest (leftovers could keep writing; they are killed next).
constexpr absl::Duration kDrainSilence = absl::Milliseconds(500);
constexpr absl::Duration kDrainLimit = absl::Seconds(2);
// How long the SIGKILLed leftovers may take to be reaped.
constexpr absl::Duration kLeftoverReapLimit = absl::Seconds(2);

constexpr int kHandled[] = {SIGINT, SIGTERM, SIGCHLD, SIGUSR2};

void OnSignal(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  auto byte = static_cast<unsigned char>(sig);
  if (sig != SIGCHLD && info != nullptr && info->si_code == SI_KERNEL) byte |= kFromTerminal;
  if (g_signal_fd >= 0) {
    [[maybe_unused]] ssize_t ignored = ::write(g_signal_fd, &byte, 1);
  }
  errno = saved_errno;
}

// Reads what is available on `fd` into `sink`; false at EOF or on a read error.
bool Drain(int fd, const ByteSink& sink) {
  char chunk[65536];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n > 0) {
      sink(absl::string_view(chunk, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
}

int ShellStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

// Reaps every ended child of this process; records `pid`'s status when it is among them.
void ReapChildren(pid_t pid, bool* exited, int* wait_status) {
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done <= 0) return;
    if (done == pid) {
      *exited = true;
      *wait_status = status;
    }
  }
}

// This process's children, from /proc (they are its own until reaped: no pid is reused).
std::vector<pid_t> Children() {
  std::vector<pid_t> found;
  const pid_t self = ::getpid();
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (const struct dirent* entry = ::readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    std::ifstream stat(absl::StrCat("/proc/", entry->d_name, "/stat"));
    std::stringstream text;
    text << stat.rdbuf();
    const std::string s = text.str();
    // "pid (comm) state ppid ...": comm may hold anything, so read after its last ')'.
    const size_t paren = s.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(s.substr(paren + 1));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == self) found.push_back(pid);
  }
  ::closedir(proc);
  return found;
}

// Kills (SIGKILL) and reaps what the child left behind, which the subreaper made ours.
void EndLeftovers(int signal_read_fd) {
  const absl::Time deadline = absl::Now() + kLeftoverReapLimit;
  std::set<pid_t> killed;
  while (absl::Now() < deadline) {
    bool dummy_exited = false;
    int dummy_status = 0;
    ReapChildren(-1, &dummy_exited, &dummy_status);
    const std::vector<pid_t> left = Children();
    if (left.empty()) return;
    for (pid_t pid : left) {
      if (killed.insert(pid).second) ::kill(pid, SIGKILL);
    }
    // Sleep until a SIGCHLD (or a signal) arrives.
    struct pollfd fd = {signal_read_fd, POLLIN, 0};
    if (::poll(&fd, 1, PollTimeoutMs(deadline - absl::Now())) > 0) {
      unsigned char bytes[64];
      while (::read(signal_read_fd, bytes, sizeof(bytes)) > 0) {
      }
    }
  }
}

}  // namespace

void StopSchedule::OnSignal(absl::Time now) {
  ++signals_;
  kill_at_ = signals_ == 1 ? std::min(kill_at_, now + grace_) : now;
}

void StopSchedule::StopAt(absl::Time when) {
  if (when >= term_at_) return;
  term_at_ = when;
  kill_at_ = std::min(kill_at_, when + grace_);
}

std::vector<int> StopSchedule::Due(absl::Time now) {
  std::vector<int> due;
  if (!term_sent_ && !kill_sent_ && now >= term_at_) {
    term_sent_ = true;
    due.push_back(SIGTERM);
  }
  if (!kill_sent_ && now >= kill_at_) {
    kill_sent_ = true;
    due.push_back(SIGKILL);
  }
  return due;
}

absl::Time StopSchedule::Next() const {
  absl::Time next = absl::InfiniteFuture();
  if (!term_sent_ && !kill_sent_) next = std::min(next, term_at_);
  if (!kill_sent_) next = std::min(next, kill_at_);
  return next;
}

absl::StatusOr<ChildEnd> RunChild(const std::string& program, const std::vector<std::string>& argv,
                                  const Environment& env, const ByteSink& on_output,
                                  const ChildOptions& options) {
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : env) env_strings.push_back(absl::StrCat(name, "=", value));
  std::vector<char*> c_argv, c_env;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  for (const std::string& e : env_strings) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);

  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  int signal_pipe[2];
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int error = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(error)));
  }
  g_signal_fd = signal_pipe[1];

  // Handlers go in before fork so a signal that arrives right after the child starts is not lost.
  struct sigaction action = {};
  action.sa_sigaction = OnSignal;
  // SA_RESTART: a write to a full stdout pipe goes on after SIGUSR2, which now ends nothing
  // (poll() is never restarted: it returns EINTR, and the loop goes on).
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  struct sigaction old_actions[std::size(kHandled)];
  for (size_t i = 0; i < std::size(kHandled); ++i) {
    ::sigaction(kHandled[i], &action, &old_actions[i]);
  }
  int was_subreaper = 0;
  ::prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const auto restore = [&] {
    ::prctl(PR_SET_CHILD_SUBREAPER, was_subreaper);
    for (size_t i = 0; i < std::size(kHandled); ++i) {
      ::sigaction(kHandled[i], &old_actions[i], nullptr);
    }
    g_signal_fd = -1;
    ::close(signal_pipe[0]);
    ::close(signal_pipe[1]);
  };

  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    restore();
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    for (size_t i = 0; i < std::size(kHandled); ++i) {
      ::sigaction(kHandled[i], &old_actions[i], nullptr);
    }
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(out_pipe[1], STDERR_FILENO);
    ::execve(program.c_str(), c_argv.data(), c_env.data());
    const std::string message =
        absl::StrCat("chorusrun: error: cannot run ", program, ": ", std::strerror(errno), "\n");
    [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, message.data(), message.size());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);

  StopSchedule schedule(options.grace);
  ChildEnd end;
  int wait_status = 0;
  bool exited = false;
  bool open = true;
  absl::Time exit_time, last_output;
  while (true) {
    const absl::Time now = absl::Now();
    absl::Time deadline = absl::InfiniteFuture();
    if (exited) {
      if (!open) break;
      deadline =
          std::min(std::max(exit_time, last_output) + kDrainSilence, exit_time + kDrainLimit);
      if (now >= deadline) break;
    } else {
      for (int sig : schedule.Due(now)) {
        if (options.on_stop) options.on_stop(sig);
        ::kill(pid, sig);
        (sig == SIGKILL ? end.killed : end.stopped) = true;
      }
      deadline = schedule.Next();
    }
    struct pollfd fds[2] = {{signal_pipe[0], POLLIN, 0}, {out_pipe[0], POLLIN, 0}};
    const int ready = ::poll(fds, open ? 2 : 1, PollTimeoutMs(deadline - now));
    if (ready < 0 && errno != EINTR) break;
    bool signalled_after_exit = false;
    if (fds[0].revents & POLLIN) {
      unsigned char bytes[64];
      ssize_t n = 0;
      while ((n = ::read(signal_pipe[0], bytes, sizeof(bytes))) > 0) {
        for (ssize_t i = 0; i < n; ++i) {
          const int sig = bytes[i] & ~kFromTerminal;
          if (sig == SIGCHLD) continue;
          if (sig == SIGUSR2) {  // a request, not a stop (see the header)
            if (!exited) {
              ::kill(pid, SIGUSR2);
              if (options.on_dump_request) options.on_dump_request();
            }
            continue;
          }
          if (!end.signal) end.signal = sig;
          if (exited) {
            signalled_after_exit = true;
            continue;
          }
          if (!(bytes[i] & kFromTerminal)) ::kill(pid, sig);
          schedule.OnSignal(absl::Now());
        }
      }
    }
    if (!exited) {
      ReapChildren(pid, &exited, &wait_status);
      if (exited) exit_time = absl::Now();
    }
    if (open && ready > 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      open = Drain(out_pipe[0], on_output);
      last_output = absl::Now();
      if (!exited && options.stop_at) {
        if (std::optional<absl::Time> when = options.stop_at()) schedule.StopAt(*when);
      }
    }
    if (signalled_after_exit) break;  // a signal ends the reading of what is left
  }
  ::close(out_pipe[0]);
  while (!exited) {
    const pid_t done = ::waitpid(pid, &wait_status, 0);
    if (done == pid) exited = true;
    if (done < 0 && errno != EINTR) break;
  }
  EndLeftovers(signal_pipe[0]);
  restore();
  end.status = ShellStatus(wait_status);
  return end;
}

}  // namespace chorus::launcher

#include "launcher/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chorus::launcher {
namespace {

volatile sig_atomic_t g_child_pid = 0;

// Once the child has exited, a pipe that stays silent this long ends the wait for EOF (workers
// that outlive mpirun could hold it open).
constexpr int kDrainAfterExitMs = 500;

// Forwards a signal another process sent to chorusrun (kill, a job scheduler). A terminal's
// Ctrl-C (si_code SI_KERNEL) already reached mpirun, which shares chorusrun's process group;
// sending it again would make mpirun force-kill instead of shutting the job down cleanly.
void ForwardSignal(int sig, siginfo_t* info, void*) {
  if (g_child_pid > 0 && (info == nullptr || info->si_code != SI_KERNEL)) {
    ::kill(g_child_pid, sig);
  }
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

}  // namespace

absl::StatusOr<int> RunChild(const std::string& program, const std::vector<std::string>& argv,
                             const Environment& env, const ByteSink& on_output) {
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

  // Handlers go in before fork so a signal that arrives right after the child starts is not lost.
  struct sigaction action = {};
  action.sa_sigaction = ForwardSignal;
  action.sa_flags = SA_SIGINFO;  // no SA_RESTART: poll() returns EINTR, and the loop goes on
  sigemptyset(&action.sa_mask);
  struct sigaction old_int, old_term;
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);

  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(out_pipe[1], STDERR_FILENO);
    ::execve(program.c_str(), c_argv.data(), c_env.data());
    const std::string message =
        absl::StrCat("chorusrun: error: cannot run ", program, ": ", std::strerror(errno), "\n");
    [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, message.data(), message.size());
    ::_exit(127);
  }
  g_child_pid = pid;
  ::close(out_pipe[1]);
  ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);

  int wait_status = 0;
  bool exited = false;
  bool open = true;
  while (open) {
    if (!exited) exited = ::waitpid(pid, &wait_status, WNOHANG) == pid;
    struct pollfd fd = {out_pipe[0], POLLIN, 0};
    const int ready = ::poll(&fd, 1, exited ? kDrainAfterExitMs : 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready == 0 && exited) break;
    if (ready > 0 && (fd.revents & (POLLIN | POLLHUP | POLLERR)))
      open = Drain(out_pipe[0], on_output);
  }
  ::close(out_pipe[0]);
  while (!exited) {
    const pid_t done = ::waitpid(pid, &wait_status, 0);
    if (done == pid) exited = true;
    if (done < 0 && errno != EINTR) break;
  }
  g_child_pid = 0;
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return ShellStatus(wait_status);
}

}  // namespace chorus::launcher

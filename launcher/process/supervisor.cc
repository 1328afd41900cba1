#include "launcher/process/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

#include "base/status_macros.h"

namespace chorus::launcher {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr int kChunksPerWakeup = 16;  // per pipe, so that one chatty worker cannot starve others

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

}  // namespace

Supervisor::Supervisor(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Supervisor>> Supervisor::Create(Options options) {
  EnsureStandardFds();
  std::unique_ptr<Supervisor> s(new Supervisor(std::move(options)));
  s->dev_null_ = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (s->dev_null_ < 0) {
    return absl::InternalError(absl::StrCat("/dev/null: ", std::strerror(errno)));
  }
  CHORUS_RETURN_IF_ERROR(s->signals_.Install());
  return s;
}

Supervisor::~Supervisor() {
  for (auto& [id, w] : workers_) {
    if (!w.running) continue;
    ::killpg(w.pid, SIGKILL);
    ::kill(w.pid, SIGKILL);  // in case it left its group
    while (::waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    w.running = false;
  }
  for (auto& [id, w] : workers_) {
    CloseOutput(w, 0);
    CloseOutput(w, 1);
    CloseFd(&w.stdin_fd);
  }
  CloseFd(&dev_null_);
  signals_.Restore();
}

absl::StatusOr<int> Supervisor::Start(const WorkerSpec& spec, OutputSink* sink, int sink_index) {
  CHORUS_ASSIGN_OR_RETURN(SpawnedProcess p,
                          SpawnProcess(spec, /*group=*/0, dev_null_, signals_.inherited_actions()));
  const int id = next_id_++;
  Worker& w = workers_[id];
  w.pid = p.pid;
  w.running = true;
  w.fds[0] = p.stdout_fd;
  w.fds[1] = p.stderr_fd;
  w.stdin_fd = p.stdin_fd;
  w.sink = sink;
  w.sink_index = sink_index;
  return id;
}

void Supervisor::Stop(int id, int sig) {
  auto it = workers_.find(id);
  if (it == workers_.end() || !it->second.running) return;
  Worker& w = it->second;
  if (w.stop_signal) sig = SIGKILL;
  if (!w.stop_signal) w.stop_signal = sig;
  ::killpg(w.pid, sig);
  ::kill(w.pid, sig);  // in case it left its group
  CloseFd(&w.stdin_fd);
  w.kill_at = sig == SIGKILL ? std::nullopt : std::optional(absl::Now() + options_.grace);
}

void Supervisor::Signal(int id, int sig) {
  auto it = workers_.find(id);
  if (it == workers_.end() || !it->second.running) return;
  ::kill(it->second.pid, sig);
}

int Supervisor::running() const {
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(),
                                        [](const auto& e) { return e.second.running; }));
}

bool Supervisor::is_running(int id) const {
  auto it = workers_.find(id);
  return it != workers_.end() && it->second.running;
}

bool Supervisor::output_open() const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [](const auto& e) { return e.second.fds[0] >= 0 || e.second.fds[1] >= 0; });
}

void Supervisor::Reap(Events* events) {
  for (auto& [id, w] : workers_) {
    if (!w.running) continue;
    siginfo_t info = {};
    // WNOWAIT: the worker stays a zombie, so its process group id cannot be reused while what
    // is left of the group is killed.
    if (::waitid(P_PID, static_cast<id_t>(w.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      // ECHILD: someone else reaped it; count it as failed.
      w.running = false;
      events->exits.push_back({id, WorkerExit{false, 1}, w.stop_signal});
      continue;
    }
    if (info.si_pid != w.pid) continue;
    ::killpg(w.pid, SIGKILL);
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    w.running = false;
    w.kill_at.reset();
    CloseFd(&w.stdin_fd);
    events->exits.push_back({id, FromWaitStatus(status), w.stop_signal});
  }
}

void Supervisor::Redirect(int id, OutputSink* sink, int sink_index) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  for (int stream = 0; stream < 2; ++stream) {
    if (w.fds[stream] < 0) continue;
    w.sink->Close(w.sink_index, stream == 0 ? OutputStream::kStdout : OutputStream::kStderr);
  }
  w.sink = sink;
  w.sink_index = sink_index;
}

void Supervisor::CloseOutput(Worker& w, int stream) {
  if (w.fds[stream] < 0) return;
  CloseFd(&w.fds[stream]);
  w.sink->Close(w.sink_index, stream == 0 ? OutputStream::kStdout : OutputStream::kStderr);
}

void Supervisor::ReadReady(int id, int stream) {
  Worker& w = workers_[id];
  char chunk[kReadChunk];
  for (int k = 0; k < kChunksPerWakeup && w.fds[stream] >= 0; ++k) {
    const ssize_t n = ::read(w.fds[stream], chunk, sizeof(chunk));
    if (n > 0) {
      w.sink->Write(w.sink_index, stream == 0 ? OutputStream::kStdout : OutputStream::kStderr,
                    absl::string_view(chunk, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    CloseOutput(w, stream);  // EOF or a read error
  }
}

void Supervisor::Forget(Events* events) {
  for (auto it = workers_.begin(); it != workers_.end();) {
    const Worker& w = it->second;
    if (!w.running && w.fds[0] < 0 && w.fds[1] < 0) {
      events->finished.push_back(it->first);
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

Supervisor::Events Supervisor::Poll(absl::Time until, bool return_when_idle) {
  Events events;
  while (true) {
    Reap(&events);
    absl::Time now = absl::Now();
    std::optional<absl::Time> next_kill;
    for (auto& [id, w] : workers_) {
      if (!w.running || !w.kill_at) continue;
      if (*w.kill_at <= now) {
        ::killpg(w.pid, SIGKILL);
        ::kill(w.pid, SIGKILL);
        w.kill_at.reset();
      } else if (!next_kill || *w.kill_at < *next_kill) {
        next_kill = w.kill_at;
      }
    }
    Forget(&events);
    if (!events.empty() || now >= until) return events;

    std::vector<struct pollfd> polled = {{signals_.read_fd(), POLLIN, 0}};
    std::vector<std::pair<int, int>> owners = {{-1, -1}};
    for (const auto& [id, w] : workers_) {
      for (int s = 0; s < 2; ++s) {
        if (w.fds[s] < 0) continue;
        polled.push_back({w.fds[s], POLLIN, 0});
        owners.emplace_back(id, s);
      }
    }
    if (return_when_idle && workers_.empty()) return events;
    absl::Time wake = until;
    if (next_kill) wake = std::min(wake, *next_kill);
    const int timeout_ms = PollTimeoutMs(wake - now);
    if (::poll(polled.data(), polled.size(), timeout_ms) <= 0) continue;
    if (polled[0].revents & POLLIN) {
      for (const int sig : signals_.Drain()) {
        if (sig == SIGINT || sig == SIGTERM) events.signals.push_back(sig);
        if (sig == SIGUSR2) ++events.dump_requests;
      }
    }
    for (size_t p = 1; p < polled.size(); ++p) {
      if ((polled[p].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ReadReady(owners[p].first, owners[p].second);
    }
  }
}

}  // namespace chorus::launcher

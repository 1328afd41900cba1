// File: base/mutex.h
//
// A std::mutex with Abseil's thread-safety annotations, so that clang's -Wthread-safety checks
// ABSL_GUARDED_BY members while ThreadSanitizer still understands every lock. (Debian's Abseil
// is not built with TSan instrumentation, so absl::Mutex would hide real happens-before edges
// and flood TSan runs with false reports.)
//
//   Mutex mu_;
//   std::condition_variable cv_;
//   int value_ ABSL_GUARDED_BY(mu_);
//   ...
//   MutexLock lock(&mu_);
//   lock.Wait(cv_, [&] { return value_ > 0; });
//
// Thread-safety: thread-safe (it is the lock).
#ifndef CHORUS_BASE_MUTEX_H_
#define CHORUS_BASE_MUTEX_H_

#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace chorus {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds `mu` for its lifetime; Wait/WaitFor release it while blocked, as condition variables do.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu->mu_) {}
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Blocks until pred() is true (pred runs with the lock held).
  template <typename Pred>
  void Wait(std::condition_variable& cv, Pred pred) {
    cv.wait(lock_, pred);
  }
  // Blocks until pred() is true or `timeout` passes; returns pred().
  template <typename Pred>
  bool WaitFor(std::condition_variable& cv, absl::Duration timeout, Pred pred) {
    return cv.wait_for(lock_, absl::ToChronoNanoseconds(timeout), pred);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

// A reader-writer lock (std::shared_mutex, i.e. pthread_rwlock, which TSan understands) with
// the same annotations: many readers (ReaderMutexLock) or one writer (WriterMutexLock).
//
//   SharedMutex mu_;
//   int value_ ABSL_GUARDED_BY(mu_);
//   ...
//   ReaderMutexLock lock(&mu_);  // reads value_
//   WriterMutexLock lock(&mu_);  // changes value_
class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

 private:
  friend class ReaderMutexLock;
  friend class WriterMutexLock;
  std::shared_mutex mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : lock_(mu->mu_) {}
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() {}
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  std::shared_lock<std::shared_mutex> lock_;
};

class ABSL_SCOPED_LOCKABLE WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu->mu_) {}
  ~WriterMutexLock() ABSL_UNLOCK_FUNCTION() {}
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  std::unique_lock<std::shared_mutex> lock_;
};

}  // namespace chorus

#endif  // CHORUS_BASE_MUTEX_H_

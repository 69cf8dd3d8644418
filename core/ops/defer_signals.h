// Asynchronous signals wait (pending, not lost) while an object of this class lives on the calling
// thread; faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) stay deliverable. For code that runs
// or starts oneDNN's JIT kernels on OpenMP threads: a signal handled while one of oneDNN 2.6's
// kernels runs has its frame written over heap memory (ops_cpu.cpp's gemm), and OpenMP threads
// inherit the mask of the thread that starts them, so a team started under it only ever runs with
// signals deferred.
#pragma once

#include <pthread.h>

#include <csignal>

namespace laconic::ops::cpu {

class DeferSignals {
 public:
  DeferSignals() {
    static const sigset_t deferred = [] {
      sigset_t set;
      sigfillset(&set);
      for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&set, sig);
      return set;
    }();
    pthread_sigmask(SIG_BLOCK, &deferred, &previous_);
  }
  ~DeferSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  DeferSignals(const DeferSignals&) = delete;
  DeferSignals& operator=(const DeferSignals&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace laconic::ops::cpu

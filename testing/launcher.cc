#include "launcher.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace hetccl::testing {

namespace {
struct Shared {
  std::atomic<int> ready;
  ncclUniqueId id;
};
}  // namespace

bool LaunchResult::allPassed() const {
  if (timedOut) return false;
  for (int c : exitCodes)
    if (c != 0) return false;
  return true;
}

LaunchResult launchLocalRanks(int nranks, const RankBody& body, double timeoutSeconds, const RankSetup& setup) {
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (shared) Shared{};
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      if (setup) setup(r);
      if (r == 0) {
        ncclResult_t res = ncclGetUniqueId(&shared->id);
        shared->ready.store(res == ncclSuccess ? 1 : 2);
        if (res != ncclSuccess) {
          fprintf(stderr, "rank 0: ncclGetUniqueId failed: %s\n", ncclGetLastError(nullptr));
          _exit(3);
        }
      } else {
        auto start = std::chrono::steady_clock::now();
        while (shared->ready.load() == 0) {
          if (std::chrono::steady_clock::now() - start > std::chrono::duration<double>(timeoutSeconds)) _exit(4);
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        if (shared->ready.load() != 1) _exit(3);
      }
      int code = body(r, nranks, shared->id);
      fflush(stdout);
      fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  LaunchResult result;
  result.exitCodes.assign(static_cast<size_t>(nranks), -1000);
  std::vector<bool> done(static_cast<size_t>(nranks), false);
  int remaining = nranks;
  auto start = std::chrono::steady_clock::now();
  while (remaining > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (done[r]) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        done[r] = true;
        --remaining;
        result.exitCodes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
    }
    if (remaining == 0) break;
    if (std::chrono::steady_clock::now() - start > std::chrono::duration<double>(timeoutSeconds)) {
      result.timedOut = true;
      for (int r = 0; r < nranks; ++r)
        if (!done[r]) kill(pids[r], SIGKILL);
      for (int r = 0; r < nranks; ++r)
        if (!done[r]) waitpid(pids[r], nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  munmap(shared, sizeof(Shared));
  return result;
}

}  // namespace hetccl::testing

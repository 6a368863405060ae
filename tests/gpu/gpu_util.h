// Shared by the GPU test programs: how many GPUs this machine has (asked
// in a child process, so the test process starts no GPU runtime itself).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime.h"

namespace gpu_test {

#define REQUIRE_GPUS(n)                                                                 \
  if (!gpu_test::hasGpus(n)) GTEST_SKIP() << "needs " << (n) << " GPU(s)"

inline int gpuCount() {
  static int count = -1;
  if (count < 0) {
    pid_t pid = fork();
    if (pid == 0) {
      hetccl::Runtime& rt = hetccl::processRuntime();
      int c = 0;
      if (rt.hasDevices()) rt.deviceCount(&c);
      _exit(c);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    count = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  }
  return count;
}

inline bool hasGpus(int n) { return gpuCount() >= n; }

}  // namespace gpu_test

// Communicator handles: a destroyed handle stays an error to use (not a
// crash) for a while, and create/destroy cycles do not grow memory
// without bound (LeakSanitizer checks this binary's exit in
// scripts/sanitize-check.sh).
#include <gtest/gtest.h>

#include "nccl.h"

TEST(Handles, DestroyedHandlesAreErrorsAndCyclesLeakNothing) {
  ncclComm_t last = nullptr;
  for (int i = 0; i < 300; ++i) {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ncclComm_t comm;
    ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
    float x = 1.0f;
    ASSERT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    if (i % 2) {
      ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
    } else {
      ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
    }
    last = comm;
  }
  int count = 0;
  EXPECT_EQ(ncclCommCount(last, &count), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("already destroyed"), std::string::npos) << ncclGetLastError(nullptr);
}

// Uses an installed hetccl: one process, two ranks, one all-reduce.
#include <cstdio>

#include <hetccl.h>
#include <nccl.h>

int main() {
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, nullptr) != ncclSuccess) return 1;
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  ncclGroupStart();
  ncclAllReduce(a, a, 4, ncclFloat32, ncclSum, comms[0], nullptr);
  ncclAllReduce(b, b, 4, ncclFloat32, ncclSum, comms[1], nullptr);
  if (ncclGroupEnd() != ncclSuccess) return 1;
  for (int i = 0; i < 4; ++i)
    if (a[i] != 11.0f * (i + 1) || b[i] != a[i]) return 1;
  for (auto c : comms) ncclCommDestroy(c);
  printf("%s: installed package works\n", hetcclVersionString());
  return 0;
}

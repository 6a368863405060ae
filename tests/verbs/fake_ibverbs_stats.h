// What the stand-in libibverbs (fake_ibverbs.cc) tells tests: the
// library exports fake_ibv_stats and fake_ibv_reset_stats (C linkage);
// tests find them with dlsym in the library hetccl loaded.
#pragma once

struct FakeIbvStats {
  long qpsWritingWithImm;     // distinct queue pairs that posted writes with immediate data
  long immWrites;             // writes with immediate data posted
  long immWritesWithData;     // of those, the ones that carried bytes
  long registrations;         // memory regions registered
  long relaxedRegistrations;  // of those, with IBV_ACCESS_RELAXED_ORDERING
};

using FakeIbvStatsFn = void (*)(FakeIbvStats*);
using FakeIbvResetStatsFn = void (*)();

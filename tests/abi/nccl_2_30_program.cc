// A program built against NVIDIA's NCCL 2.30.7 header (not hetccl's) that
// calls every entry point 2.29 and 2.30 added, linked against hetccl
// alone: it must link, load and get, on one host rank, what hetccl
// documents for each call (docs/usage.md), with the ABI of NVIDIA's
// header (the config's 2.30 layout and version included).
#include <nccl.h>

#ifndef CUDART_VERSION  // NVIDIA's header includes the CUDA runtime's; hetccl's does not
#error "built against hetccl's nccl.h, not NVIDIA's 2.30.7 header"
#endif
#if NCCL_VERSION_CODE != 23007
#error "not NCCL 2.30.7's header"
#endif

#include <cstdio>
#include <cstring>

#define EXPECT(cond)                                             \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #cond); \
      return 1;                                                  \
    }                                                            \
  } while (0)

int main() {
  int version = 0;
  EXPECT(ncclGetVersion(&version) == ncclSuccess && version >= NCCL_VERSION(2, 30, 0));
  ncclUniqueId id;
  EXPECT(ncclGetUniqueId(&id) == ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;  // 2.30's layout and version
  config.maxP2pPeers = 2;
  ncclComm_t comm = nullptr;
  EXPECT(ncclCommInitRankConfig(&comm, 1, id, 0, &config) == ncclSuccess);

  float data[16] = {1.0f};
  ncclWindow_t win = nullptr;
  EXPECT(ncclCommWindowRegister(comm, data, sizeof(data), &win, NCCL_WIN_STRICT_ORDERING) == ncclSuccess);
  void* user = nullptr;
  EXPECT(ncclWinGetUserPtr(comm, win, &user) == ncclSuccess && user == data);
  // One rank puts into its own window: the data lands, both signals count.
  const float four[4] = {5.0f, 6.0f, 7.0f, 8.0f};
  EXPECT(ncclPutSignal(four, 4, ncclFloat32, 0, win, 8 * sizeof(float), 0, 0, 0, comm, nullptr) == ncclSuccess);
  EXPECT(ncclSignal(0, 0, 0, 0, comm, nullptr) == ncclSuccess);
  ncclWaitSignalDesc_t desc = {2, 0, 0, 0};
  EXPECT(ncclWaitSignal(1, &desc, comm, nullptr) == ncclSuccess);
  EXPECT(data[8] == 5.0f && data[11] == 8.0f);
  EXPECT(ncclCommWindowDeregister(comm, win) == ncclSuccess);
  uint64_t bytes = 7;
  EXPECT(ncclCommMemStats(comm, ncclStatGpuMemTotal, &bytes) == ncclSuccess && bytes == 0);  // no GPU memory
  EXPECT(ncclCommSuspend(comm, NCCL_SUSPEND_MEM) == ncclSuccess);
  EXPECT(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &bytes) == ncclSuccess && bytes == 1);
  EXPECT(ncclCommResume(comm) == ncclSuccess);
  ncclUniqueId growId;
  EXPECT(ncclCommGetUniqueId(comm, &growId) == ncclSuccess);
  ncclComm_t grown = nullptr;  // no rank passes the id: refused alike everywhere
  EXPECT(ncclCommGrow(comm, 2, nullptr, -1, &grown, nullptr) == ncclInvalidUsage && grown == nullptr);
  EXPECT(strstr(ncclGetErrorString(ncclTimeout), "timeout") != nullptr);

  ncclParamHandle_t h = nullptr;
  EXPECT(ncclParamBind(&h, "NCCL_DEBUG") == ncclSuccess);
  const char* text = nullptr;
  EXPECT(ncclParamGetStr(h, &text) == ncclSuccess && text);
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  EXPECT(ncclParamBind(&h, "HETCCL_STREAM_SLOTS") == ncclSuccess);
  EXPECT(ncclParamGetI8(h, &i8) == ncclSuccess && i8 == 8 && ncclParamGetI16(h, &i16) == ncclSuccess && i16 == 8);
  EXPECT(ncclParamGetI32(h, &i32) == ncclSuccess && i32 == 8 && ncclParamGetI64(h, &i64) == ncclSuccess && i64 == 8);
  EXPECT(ncclParamGetU8(h, &u8) == ncclSuccess && u8 == 8 && ncclParamGetU16(h, &u16) == ncclSuccess && u16 == 8);
  EXPECT(ncclParamGetU32(h, &u32) == ncclSuccess && u32 == 8 && ncclParamGetU64(h, &u64) == ncclSuccess && u64 == 8);
  char raw[8];
  int len = 0;
  EXPECT(ncclParamGet(h, raw, sizeof(raw), &len) == ncclSuccess && len == 2 && strcmp(raw, "8") == 0);
  EXPECT(ncclParamGetParameter("HETCCL_STREAM_SLOTS", &text, &len) == ncclSuccess && strcmp(text, "8") == 0);
  const char** keys = nullptr;
  EXPECT(ncclParamGetAllParameterKeys(&keys, &len) == ncclSuccess && len > 0 && keys[0]);
  ncclParamDumpAll();

  // The communicator still works: a one-rank all-reduce.
  data[0] = 2.5f;
  EXPECT(ncclAllReduce(data, data, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess && data[0] == 2.5f);
  EXPECT(ncclCommDestroy(comm) == ncclSuccess);
  printf("every NCCL 2.30 entry point linked and answered as documented\n");
  return 0;
}

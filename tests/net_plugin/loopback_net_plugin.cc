// A test ncclNet plugin: TCP over loopback, exporting one ABI version
// (HETCCL_TEST_NET_VERSION, 8 to 11) as ncclNetPlugin_v<N>. It stands in
// for a real network's plugin (EFA, InfiniBand, TCPX) where there is none,
// and it holds its caller to the plugin contract, so that hetccl's plugin
// transport is tested against it and the plugin itself against NCCL
// (scripts/gpu-check.sh loads it into NCCL too):
//   - connect and accept return no comm on their first call (the caller must
//     poll), connect keeping its progress in the caller's handle;
//   - isend/irecv need a registered region (regMr, host memory) around the
//     data, and give no request when TEST_NET_MAX_REQUESTS (default 8) are in
//     flight on the comm;
//   - a receive smaller than the message, or of another tag, is an error;
//   - version 11: listen and connect must get the context init returned.
// TEST_NET_MAX_P2P_BYTES sets the maxP2pBytes it reports (versions 9+);
// TEST_NET_NAME the name it gives; TEST_NET_BREAK_AFTER=N makes every send
// after the N-th fail (a broken network); TEST_NET_UNREACHABLE=1 makes
// connect never finish (a peer the network cannot reach);
// TEST_NET_DELAY_US=N reports a receive done only N us after its data is in
// (a slow network: the parts of a message arrive far apart);
// TEST_NET_DEVICES=N reports N devices (NICs), all on loopback.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "transport/net_plugin/net_plugin_abi.h"

#ifndef HETCCL_TEST_NET_VERSION
#error "build with -DHETCCL_TEST_NET_VERSION=8..11"
#endif

namespace {

using namespace hetccl::netabi;

Logger gLog = nullptr;
int gContext = 0;  // version 11's context is &gContext

#define PLUGIN_WARN(...) \
  do { if (gLog) gLog(kLogWarn, ~0ul, __FILE__, __LINE__, __VA_ARGS__); } while (0)

long envOr(const char* name, long fallback) {
  const char* v = getenv(name);
  return v && *v ? strtol(v, nullptr, 0) : fallback;
}

constexpr uint32_t kHandleMagic = 0x4c4f4f50;
constexpr uint64_t kRegionMagic = 0x5245474e52454749ull;

struct Handle {  // lives in the caller's kHandleBytes
  uint32_t magic;
  uint32_t connectStage;  // connect's progress: 0 not begun, 1 asked once
  sockaddr_in address;
};
static_assert(sizeof(Handle) <= kHandleBytes, "handle too large");

struct Region {
  uint64_t magic;
  char* begin;
  size_t size;
};

struct WireHeader {
  int32_t tag;
  uint32_t pad;
  uint64_t size;
};

struct Comm;
struct Req {
  Comm* comm;
  char* data;
  size_t capacity;  // receives: the most that may arrive
  int tag;
  WireHeader header{};
  size_t headerDone = 0, bodyDone = 0;
  bool complete = false;
  std::chrono::steady_clock::time_point completedAt{};
};

struct Comm {
  int fd = -1;
  bool sender = false;
  bool broken = false;
  std::deque<Req*> queue;  // unfinished, in order
  std::deque<Req*> finished;  // complete, not yet reported by test
};

struct Listen {
  int fd = -1;
  int acceptCalls = 0;
};

// Moves what the socket takes now; false when the peer is gone.
bool move(Comm* c, bool out, void* data, size_t size, size_t* done) {
  while (*done < size) {
    ssize_t n = out ? send(c->fd, static_cast<char*>(data) + *done, size - *done, MSG_NOSIGNAL)
                    : recv(c->fd, static_cast<char*>(data) + *done, size - *done, 0);
    if (n > 0) {
      *done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
  return true;
}

ncclResult_t drive(Comm* c) {
  if (c->broken) return ncclRemoteError;
  while (!c->queue.empty()) {
    Req* r = c->queue.front();
    if (!move(c, c->sender, &r->header, sizeof r->header, &r->headerDone)) {
      c->broken = true;
      PLUGIN_WARN("loopback net: the peer closed the connection");
      return ncclRemoteError;
    }
    if (r->headerDone < sizeof r->header) return ncclSuccess;
    if (!c->sender && (r->header.size > r->capacity || r->header.tag != r->tag)) {
      PLUGIN_WARN("loopback net: a message of %llu bytes, tag %d, for a receive of %zu bytes, tag %d",
                  static_cast<unsigned long long>(r->header.size), r->header.tag, r->capacity, r->tag);
      c->broken = true;
      return ncclInvalidUsage;
    }
    if (!move(c, c->sender, r->data, r->header.size, &r->bodyDone)) {
      c->broken = true;
      PLUGIN_WARN("loopback net: the peer closed the connection");
      return ncclRemoteError;
    }
    if (r->bodyDone < r->header.size) return ncclSuccess;
    r->complete = true;
    r->completedAt = std::chrono::steady_clock::now();
    c->queue.pop_front();
    c->finished.push_back(r);
  }
  return ncclSuccess;
}

bool registered(const void* mhandle, const void* data, size_t size) {
  const auto* region = static_cast<const Region*>(mhandle);
  if (!region || region->magic != kRegionMagic) return false;
  const char* p = static_cast<const char*>(data);
  return size == 0 || (p >= region->begin && p + size <= region->begin + region->size);
}

ncclResult_t post(void* comm, bool sender, void* data, size_t size, int tag, void* mhandle, void** request) {
  auto* c = static_cast<Comm*>(comm);
  *request = nullptr;
  if (c->sender != sender) {
    PLUGIN_WARN("loopback net: %s on a %s comm", sender ? "isend" : "irecv", c->sender ? "send" : "receive");
    return ncclInvalidUsage;
  }
  if (!registered(mhandle, data, size)) {
    PLUGIN_WARN("loopback net: %zu bytes at %p are not inside the region registered as %p", size, data, mhandle);
    return ncclInvalidArgument;
  }
  if (static_cast<long>(c->queue.size() + c->finished.size()) >= envOr("TEST_NET_MAX_REQUESTS", 8)) return ncclSuccess;
  static long sends = 0;
  const long breakAfter = envOr("TEST_NET_BREAK_AFTER", -1);
  if (sender && breakAfter >= 0 && ++sends > breakAfter) {
    PLUGIN_WARN("loopback net: broken after %ld sends (TEST_NET_BREAK_AFTER)", breakAfter);
    return ncclSystemError;
  }
  auto* r = new Req{c, static_cast<char*>(data), size, tag};
  if (sender) r->header = WireHeader{tag, 0, size};
  c->queue.push_back(r);
  *request = r;
  return ncclSuccess;
}

int deviceCount() { return static_cast<int>(envOr("TEST_NET_DEVICES", 1)); }
bool knownDevice(int dev) {
  if (dev >= 0 && dev < deviceCount()) return true;
  PLUGIN_WARN("loopback net: device %d asked for; there are %d", dev, deviceCount());
  return false;
}

ncclResult_t pluginDevices(int* count) {
  *count = deviceCount();
  return ncclSuccess;
}

template <typename Props>
ncclResult_t fillProperties(int dev, Props* p) {
  if (!knownDevice(dev)) return ncclInvalidArgument;
  memset(p, 0, sizeof *p);
  p->name = const_cast<char*>("loopback");
  p->pciPath = nullptr;
  p->guid = 0x4c4f4f50 + static_cast<uint64_t>(dev);
  p->ptrSupport = kPtrHost;
  p->speed = 10000;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  if constexpr (HETCCL_TEST_NET_VERSION >= 9) {
    p->vProps.ndevs = 1;
    p->vProps.devs[0] = 0;
    p->maxP2pBytes = static_cast<size_t>(envOr("TEST_NET_MAX_P2P_BYTES", 1l << 30));
    p->maxCollBytes = p->maxP2pBytes;
  }
  return ncclSuccess;
}

ncclResult_t listenOn(int dev, void* handle, void** listenComm) {
  if (!knownDevice(dev)) return ncclInvalidArgument;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ncclSystemError;
  Handle h{};
  h.magic = kHandleMagic;
  h.address.sin_family = AF_INET;
  h.address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof h.address;
  if (bind(fd, reinterpret_cast<sockaddr*>(&h.address), sizeof h.address) != 0 || ::listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&h.address), &len) != 0) {
    close(fd);
    return ncclSystemError;
  }
  memset(handle, 0, kHandleBytes);
  memcpy(handle, &h, sizeof h);
  *listenComm = new Listen{fd};
  return ncclSuccess;
}

ncclResult_t connectTo(int dev, void* handle, void** sendComm) {
  *sendComm = nullptr;
  auto* h = static_cast<Handle*>(handle);
  if (!knownDevice(dev) || h->magic != kHandleMagic) return ncclInvalidArgument;
  if (h->connectStage++ == 0 || envOr("TEST_NET_UNREACHABLE", 0)) return ncclSuccess;  // the caller must ask again
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ncclSystemError;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&h->address), sizeof h->address) != 0) {
    close(fd);
    return ncclRemoteError;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto* c = new Comm;
  c->fd = fd;
  c->sender = true;
  *sendComm = c;
  return ncclSuccess;
}

ncclResult_t pluginAccept(void* listenComm, void** recvComm, DeviceHandle**) {
  *recvComm = nullptr;
  auto* l = static_cast<Listen*>(listenComm);
  if (l->acceptCalls++ == 0) return ncclSuccess;  // the caller must ask again
  int fd = accept4(l->fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? ncclSuccess : ncclSystemError;
  auto* c = new Comm;
  c->fd = fd;
  *recvComm = c;
  return ncclSuccess;
}

ncclResult_t pluginRegMr(void*, void* data, size_t size, int type, void** mhandle) {
  if (type != kPtrHost) {
    PLUGIN_WARN("loopback net: regMr of memory type %d; only host memory was offered", type);
    return ncclInvalidArgument;
  }
  *mhandle = new Region{kRegionMagic, static_cast<char*>(data), size};
  return ncclSuccess;
}
ncclResult_t pluginRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return ncclInvalidUsage; }
ncclResult_t pluginDeregMr(void*, void* mhandle) {
  auto* region = static_cast<Region*>(mhandle);
  if (!region || region->magic != kRegionMagic) return ncclInvalidArgument;
  region->magic = 0;
  delete region;
  return ncclSuccess;
}

ncclResult_t pluginIflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t pluginTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<Req*>(request);
  Comm* c = r->comm;
  ncclResult_t res = drive(c);
  if (res != ncclSuccess) return res;
  static const long delayUs = envOr("TEST_NET_DELAY_US", 0);
  const bool delayed = delayUs > 0 && !c->sender &&
                       std::chrono::steady_clock::now() - r->completedAt < std::chrono::microseconds(delayUs);
  *done = r->complete && !delayed ? 1 : 0;
  if (!*done) return ncclSuccess;
  if (sizes) sizes[0] = static_cast<int>(r->header.size);
  for (auto it = c->finished.begin(); it != c->finished.end(); ++it)
    if (*it == r) {
      c->finished.erase(it);
      break;
    }
  delete r;
  return ncclSuccess;
}

ncclResult_t closeComm(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  if (!c) return ncclSuccess;
  for (Req* r : c->queue) delete r;
  for (Req* r : c->finished) delete r;
  close(c->fd);
  delete c;
  return ncclSuccess;
}
ncclResult_t closeListen(void* listenComm) {
  auto* l = static_cast<Listen*>(listenComm);
  if (l) close(l->fd);
  delete l;
  return ncclSuccess;
}
ncclResult_t pluginGetDeviceMr(void*, void*, void**) { return ncclInternalError; }
ncclResult_t pluginIrecvConsumed(void*, int, void*) { return ncclSuccess; }
ncclResult_t pluginMakeVDevice(int*, VirtualDeviceProperties*) { return ncclInvalidUsage; }

ncclResult_t sendOne(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return post(comm, true, data, size, tag, mhandle, request);
}
ncclResult_t recvOne(void* comm, int n, void** data, const size_t* sizes, int* tags, void** mhandles, void** request) {
  if (n != 1) return ncclInvalidArgument;  // maxRecvs is 1
  return post(comm, false, data[0], sizes[0], tags[0], mhandles[0], request);
}

const char* pluginName() {
  const char* v = getenv("TEST_NET_NAME");
  return v && *v ? v : "loopback";
}

// The exported table of this build's version.
#if HETCCL_TEST_NET_VERSION == 8
ncclResult_t init8(Logger logger) { gLog = logger; return ncclSuccess; }
ncclResult_t props8(int dev, Properties8* p) { return fillProperties(dev, p); }
ncclResult_t connect8(int dev, void* handle, void** sendComm, DeviceHandle**) { return connectTo(dev, handle, sendComm); }
ncclResult_t isend8(void* c, void* data, int size, int tag, void* mh, void** req) {
  return size < 0 ? ncclInvalidArgument : sendOne(c, data, static_cast<size_t>(size), tag, mh, req);
}
ncclResult_t irecv8(void* c, int n, void** data, int* sizes, int* tags, void** mhs, void** req) {
  size_t size = n == 1 && sizes[0] >= 0 ? static_cast<size_t>(sizes[0]) : 0;
  return recvOne(c, n, data, &size, tags, mhs, req);
}
}  // namespace
extern "C" {
__attribute__((visibility("default"))) Net8 ncclNetPlugin_v8 = {
    pluginName(), init8, pluginDevices, props8, listenOn, connect8, pluginAccept, pluginRegMr, pluginRegMrDmaBuf,
    pluginDeregMr, isend8, irecv8, pluginIflush, pluginTest, closeComm, closeComm, closeListen, pluginGetDeviceMr,
    pluginIrecvConsumed};
}
#elif HETCCL_TEST_NET_VERSION == 9
ncclResult_t init9(Logger logger) { gLog = logger; return ncclSuccess; }
ncclResult_t props9(int dev, Properties9* p) { return fillProperties(dev, p); }
ncclResult_t connect9(int dev, void* handle, void** sendComm, DeviceHandle**) { return connectTo(dev, handle, sendComm); }
ncclResult_t irecv9(void* c, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req) {
  return recvOne(c, n, data, sizes, tags, mhs, req);
}
}  // namespace
extern "C" {
__attribute__((visibility("default"))) Net9 ncclNetPlugin_v9 = {
    pluginName(), init9, pluginDevices, props9, listenOn, connect9, pluginAccept, pluginRegMr, pluginRegMrDmaBuf,
    pluginDeregMr, sendOne, irecv9, pluginIflush, pluginTest, closeComm, closeComm, closeListen, pluginGetDeviceMr,
    pluginIrecvConsumed, pluginMakeVDevice};
}
#elif HETCCL_TEST_NET_VERSION == 10
ncclResult_t init10(Logger logger, ProfilerCallback) { gLog = logger; return ncclSuccess; }
ncclResult_t props10(int dev, Properties9* p) { return fillProperties(dev, p); }
ncclResult_t connect10(int dev, CommConfig*, void* handle, void** sendComm, DeviceHandle**) {
  return connectTo(dev, handle, sendComm);
}
ncclResult_t isend10(void* c, void* data, size_t size, int tag, void* mh, void*, void** req) {
  return sendOne(c, data, size, tag, mh, req);
}
ncclResult_t irecv10(void* c, int n, void** data, size_t* sizes, int* tags, void** mhs, void**, void** req) {
  return recvOne(c, n, data, sizes, tags, mhs, req);
}
}  // namespace
extern "C" {
__attribute__((visibility("default"))) Net10 ncclNetPlugin_v10 = {
    pluginName(), init10, pluginDevices, props10, listenOn, connect10, pluginAccept, pluginRegMr, pluginRegMrDmaBuf,
    pluginDeregMr, isend10, irecv10, pluginIflush, pluginTest, closeComm, closeComm, closeListen, pluginGetDeviceMr,
    pluginIrecvConsumed, pluginMakeVDevice};
}
#elif HETCCL_TEST_NET_VERSION == 11
ncclResult_t init11(void** context, uint64_t, CommConfig*, Logger logger, ProfilerCallback) {
  gLog = logger;
  *context = &gContext;
  return ncclSuccess;
}
bool ownContext(void* context) {
  if (context == &gContext) return true;
  PLUGIN_WARN("loopback net: called with context %p, not the one init returned", context);
  return false;
}
ncclResult_t props11(int dev, Properties11* p) {
  ncclResult_t r = fillProperties(dev, p);
  p->maxMultiRequestSize = 1;
  return r;
}
ncclResult_t listen11(void* context, int dev, void* handle, void** listenComm) {
  return ownContext(context) ? listenOn(dev, handle, listenComm) : ncclInvalidArgument;
}
ncclResult_t connect11(void* context, int dev, void* handle, void** sendComm, DeviceHandle**) {
  return ownContext(context) ? connectTo(dev, handle, sendComm) : ncclInvalidArgument;
}
ncclResult_t isend11(void* c, void* data, size_t size, int tag, void* mh, void*, void** req) {
  return sendOne(c, data, size, tag, mh, req);
}
ncclResult_t irecv11(void* c, int n, void** data, size_t* sizes, int* tags, void** mhs, void**, void** req) {
  return recvOne(c, n, data, sizes, tags, mhs, req);
}
ncclResult_t finalize11(void* context) { return ownContext(context) ? ncclSuccess : ncclInvalidArgument; }
}  // namespace
extern "C" {
__attribute__((visibility("default"))) Net11 ncclNetPlugin_v11 = {
    pluginName(), init11, pluginDevices, props11, listen11, connect11, pluginAccept, pluginRegMr, pluginRegMrDmaBuf,
    pluginDeregMr, isend11, irecv11, pluginIflush, pluginTest, closeComm, closeComm, closeListen, pluginGetDeviceMr,
    pluginIrecvConsumed, pluginMakeVDevice, finalize11, nullptr};
}
#else
#error "HETCCL_TEST_NET_VERSION must be 8, 9, 10 or 11"
#endif

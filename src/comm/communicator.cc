#include "comm/communicator.h"

#include <cstring>

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"

namespace hetccl {

ncclResult_t readConfig(const ncclConfig_t* config, CommConfig* out) {
  *out = CommConfig{};
  if (!config) return ncclSuccess;
  if (config->magic != 0xcafebeef)
    return fail(ncclInvalidArgument, "ncclConfig_t was not initialized with NCCL_CONFIG_INITIALIZER (bad magic)");
  // Older layouts are prefixes of the current one: read only what the
  // application's struct has, by its size field.
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  size_t n = config->size;
  if (n < offsetof(ncclConfig_t, blocking) + sizeof(int) || n > 4096)
    return fail(ncclInvalidArgument, "ncclConfig_t has an invalid size %zu", n);
  memcpy(&c, config, n < sizeof(c) ? n : sizeof(c));
  if (c.blocking != NCCL_CONFIG_UNDEF_INT) {
    if (c.blocking != 0 && c.blocking != 1)
      return fail(ncclInvalidArgument, "ncclConfig_t.blocking must be 0 or 1, not %d", c.blocking);
    out->blocking = c.blocking == 1;
  }
  if (n >= offsetof(ncclConfig_t, commName) + sizeof(char*) && c.commName) out->name = c.commName;
  return ncclSuccess;
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Worker::submit(std::function<ncclResult_t()> job) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!thread_.joinable()) thread_ = std::thread(&Worker::loop, this);
  job_ = std::move(job);
  hasJob_ = true;
  done_ = false;
  cv_.notify_all();
}

ncclResult_t Worker::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  return result_;
}

void Worker::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return hasJob_ || stop_; });
    if (stop_) return;
    auto job = std::move(job_);
    hasJob_ = false;
    lock.unlock();
    ncclResult_t r = job();
    lock.lock();
    result_ = r;
    done_ = true;
    cv_.notify_all();
  }
}

Communicator::~Communicator() { waitReady(); }

ncclResult_t Communicator::finishInit() {
  tunables = peers[0].tunables;
  TransportContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.secret = secret;
  ctx.peers = &peers;
  ctx.listener = &listener;
  ctx.abort = &abort;
  ctx.timeoutSeconds = params().timeoutSeconds;
  net = std::make_unique<Net>(ctx);
  sendSeq.assign(static_cast<size_t>(nranks), 0);
  recvSeq.assign(static_cast<size_t>(nranks), 0);
  if (rank == 0) printSummary();
  return ncclSuccess;
}

ncclResult_t Communicator::waitReady() {
  {
    std::lock_guard<std::mutex> lock(initMutex);
    if (initThread.joinable() && initThread.get_id() != std::this_thread::get_id()) initThread.join();
  }
  return asyncError.load();
}

char* Communicator::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void Communicator::setFatal(ncclResult_t error) {
  ncclResult_t expected = ncclSuccess;
  if (asyncError.compare_exchange_strong(expected, error)) asyncErrorText = lastError();
  if (net) net->markGone();
}

void Communicator::printSummary() const {
  if (!logEnabled(LogLevel::Info)) return;
  int hosts = 0;
  std::vector<uint64_t> seen;
  for (const auto& p : peers) {
    bool found = false;
    for (uint64_t h : seen) found |= h == p.hostHash;
    if (!found) { seen.push_back(p.hostHash); ++hosts; }
  }
  HETCCL_INFO("comm %p%s%s: %d ranks on %d host(s), all host (CPU) ranks, native algorithms; transports: %s",
              static_cast<const void*>(this), config.name.empty() ? "" : " ", config.name.c_str(), nranks, hosts,
              nranks > 1 ? (hosts > 1 ? "shm within a host, socket between hosts" : net->transportName(1))
                         : "none (single rank)");
}

}  // namespace hetccl

// hetccl-perf's buffers: host memory on host ranks; on GPU ranks, device
// memory with host mirrors (inputs are made on the host and uploaded,
// results downloaded for checking) and a stream for the collectives.
// The GPU is reached through hetccl's runtime table (dlopen), so the tool
// needs no GPU library to build or start.
#pragma once

#include <cstdio>
#include <cstring>
#include <vector>

#include "nccl.h"
#include "runtime/runtime.h"

class PerfBuffers {
 public:
  // Picks this process's runtime (HETCCL_DEVICE=host forces the host) and,
  // on GPUs, device localRank % count. Call before ncclCommInitRank.
  bool open(int localRank, size_t bytes) {
    rt_ = &hetccl::processRuntime();
    gpu_ = rt_->hasDevices();
    if (bytes > hostSend_.max_size()) return false;  // (and g++ 13 then knows the fills below are bounded)
    hostSend_.assign(bytes, 0);
    hostRecv_.assign(bytes, 0);
    if (!gpu_) return true;
    int count = 0;
    if (rt_->deviceCount(&count) != ncclSuccess || count == 0) return false;
    device_ = localRank % count;
    return rt_->setDevice(device_) == ncclSuccess && rt_->allocDevice(&send_, bytes) == ncclSuccess &&
           rt_->allocDevice(&recv_, bytes) == ncclSuccess && rt_->allocDevice(&control_, 64) == ncclSuccess &&
           rt_->createStream(&stream_) == ncclSuccess;
  }
  ~PerfBuffers() {
    if (!gpu_) return;
    rt_->freeDevice(send_);
    rt_->freeDevice(recv_);
    rt_->freeDevice(control_);
    rt_->destroyStream(stream_);
  }

  bool gpu() const { return gpu_; }
  int device() const { return device_; }
  const char* runtimeName() const { return rt_->name(); }
  // What the collectives get.
  char* send() { return gpu_ ? static_cast<char*>(send_) : hostSend_.data(); }
  char* recv() { return gpu_ ? static_cast<char*>(recv_) : hostRecv_.data(); }
  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_); }
  // The host mirror of recv() (the buffer itself on the host).
  char* hostRecv() { return hostRecv_.data(); }
  // The host address that mirrors device address p (p itself on the host).
  char* mirrorOf(const char* p) {
    if (!gpu_) return const_cast<char*>(p);
    if (p >= send() && p < send() + hostSend_.size()) return hostSend_.data() + (p - send());
    return hostRecv_.data() + (p - recv());
  }
  // Copies both mirrors to the device, or the device buffers to the mirrors.
  void upload() { copy(send_, hostSend_.data(), recv_, hostRecv_.data()); }
  void download() { copy(hostSend_.data(), send_, hostRecv_.data(), recv_); }
  void synchronize() {
    if (gpu_) rt_->synchronize(stream_);
  }
  // Makes this rank's device current (before ncclCommInitRank).
  void makeCurrent() {
    if (gpu_) rt_->setDevice(device_);
  }
  // A small buffer for one-element collectives on host values (seed,
  // timings, error counts): stage() puts a value there, unstage() takes
  // the result back (waiting for the stream).
  void* control() { return gpu_ ? control_ : hostControl_; }
  ncclResult_t stage(const void* value, size_t bytes) {
    if (!gpu_) {
      memcpy(hostControl_, value, bytes);
      return ncclSuccess;
    }
    return rt_->copyAsync(control_, value, bytes, stream_);
  }
  void unstage(void* value, size_t bytes) {
    if (!gpu_) {
      memcpy(value, hostControl_, bytes);
      return;
    }
    rt_->copyAsync(value, control_, bytes, stream_);
    rt_->synchronize(stream_);
  }

 private:
  void copy(void* dst1, const void* src1, void* dst2, const void* src2) {
    if (!gpu_) return;
    rt_->copyAsync(dst1, src1, hostSend_.size(), stream_);
    rt_->copyAsync(dst2, src2, hostRecv_.size(), stream_);
    rt_->synchronize(stream_);
  }

  hetccl::Runtime* rt_ = nullptr;
  bool gpu_ = false;
  int device_ = -1;
  std::vector<char> hostSend_, hostRecv_;
  void *send_ = nullptr, *recv_ = nullptr, *control_ = nullptr;
  alignas(8) char hostControl_[64] = {};
  hetccl::Stream stream_ = nullptr;
};

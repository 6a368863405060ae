// The ncclNet plugin ABI, versions 8 to 11: what a network plugin library
// (libnccl-net-*.so, RCCL's librccl-net.so) exports as the C symbol
// ncclNetPlugin_v<N>, a table of function pointers. Written for hetccl from
// the documented layout (field order, types and sizes carry over; nothing
// else does). Only the point-to-point network is declared, not CollNet.
//
// Version differences that matter to a caller:
//   v8:  init(logger); isend/irecv sizes are int.
//   v9:  isend/irecv sizes are size_t; properties gain forceFlush, vProps,
//        maxP2pBytes, maxCollBytes; makeVDevice.
//   v10: init(logger, profiler); connect takes a comm config; isend/irecv
//        take profiler handles.
//   v11: init(&ctx, commId, config, logger, profiler) returns a context
//        that listen and connect take; properties gain
//        maxMultiRequestSize; finalize, setNetAttr.
// test() reports sizes as int in every version.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace hetccl::netabi {

constexpr int kHandleBytes = 128;  // a listen handle, exchanged between the ranks
constexpr int kPtrHost = 0x1;
constexpr int kPtrCuda = 0x2;
constexpr int kPtrDmabuf = 0x4;
constexpr int kMaxDevicesPerNic = 4;
constexpr int kTrafficClassUndefined = -1;

enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5 };
using Logger = void (*)(LogLevel level, unsigned long flags, const char* file, int line, const char* format, ...);
using ProfilerCallback = ncclResult_t (*)(void** eventHandle, int type, void* parentHandle, int64_t pluginId,
                                          void* extraData);
struct DeviceHandle;  // device offload (ncclNetDeviceHandle): hetccl never asks for it

struct Properties8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;  // kPtr* bits
  int regIsGlobal;
  int speed;  // Mb/s
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
};

struct VirtualDeviceProperties {
  int ndevs;
  int devs[kMaxDevicesPerNic];
};

struct Properties9 {  // also version 10's
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VirtualDeviceProperties vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
};

struct Properties11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VirtualDeviceProperties vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};

struct CommConfig {  // versions 10 and 11
  int trafficClass;
};

// The functions every version has with the same signature.
using DevicesFn = ncclResult_t (*)(int* count);
using AcceptFn = ncclResult_t (*)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
using RegMrFn = ncclResult_t (*)(void* comm, void* data, size_t size, int type, void** mhandle);
using RegMrDmaBufFn = ncclResult_t (*)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                       void** mhandle);
using DeregMrFn = ncclResult_t (*)(void* comm, void* mhandle);
using IflushFn = ncclResult_t (*)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
using TestFn = ncclResult_t (*)(void* request, int* done, int* sizes);
using CloseFn = ncclResult_t (*)(void* comm);
using GetDeviceMrFn = ncclResult_t (*)(void* comm, void* mhandle, void** deviceMhandle);
using IrecvConsumedFn = ncclResult_t (*)(void* recvComm, int n, void* request);

struct Net8 {
  const char* name;
  ncclResult_t (*init)(Logger logger);
  DevicesFn devices;
  ncclResult_t (*getProperties)(int dev, Properties8* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  AcceptFn accept;
  RegMrFn regMr;
  RegMrDmaBufFn regMrDmaBuf;
  DeregMrFn deregMr;
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  IflushFn iflush;
  TestFn test;
  CloseFn closeSend;
  CloseFn closeRecv;
  CloseFn closeListen;
  GetDeviceMrFn getDeviceMr;
  IrecvConsumedFn irecvConsumed;
};

struct Net9 {
  const char* name;
  ncclResult_t (*init)(Logger logger);
  DevicesFn devices;
  ncclResult_t (*getProperties)(int dev, Properties9* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  AcceptFn accept;
  RegMrFn regMr;
  RegMrDmaBufFn regMrDmaBuf;
  DeregMrFn deregMr;
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  IflushFn iflush;
  TestFn test;
  CloseFn closeSend;
  CloseFn closeRecv;
  CloseFn closeListen;
  GetDeviceMrFn getDeviceMr;
  IrecvConsumedFn irecvConsumed;
  ncclResult_t (*makeVDevice)(int* dev, VirtualDeviceProperties* props);
};

struct Net10 {
  const char* name;
  ncclResult_t (*init)(Logger logger, ProfilerCallback profiler);
  DevicesFn devices;
  ncclResult_t (*getProperties)(int dev, Properties9* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, CommConfig* config, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  AcceptFn accept;
  RegMrFn regMr;
  RegMrDmaBufFn regMrDmaBuf;
  DeregMrFn deregMr;
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  IflushFn iflush;
  TestFn test;
  CloseFn closeSend;
  CloseFn closeRecv;
  CloseFn closeListen;
  GetDeviceMrFn getDeviceMr;
  IrecvConsumedFn irecvConsumed;
  ncclResult_t (*makeVDevice)(int* dev, VirtualDeviceProperties* props);
};

struct Net11 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, CommConfig* config, Logger logger, ProfilerCallback profiler);
  DevicesFn devices;
  ncclResult_t (*getProperties)(int dev, Properties11* props);
  ncclResult_t (*listen)(void* context, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* context, int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  AcceptFn accept;
  RegMrFn regMr;
  RegMrDmaBufFn regMrDmaBuf;
  DeregMrFn deregMr;
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  IflushFn iflush;
  TestFn test;
  CloseFn closeSend;
  CloseFn closeRecv;
  CloseFn closeListen;
  GetDeviceMrFn getDeviceMr;
  IrecvConsumedFn irecvConsumed;
  ncclResult_t (*makeVDevice)(int* dev, VirtualDeviceProperties* props);
  ncclResult_t (*finalize)(void* context);
  void* setNetAttr;  // (context, attributes): not used by hetccl
};

}  // namespace hetccl::netabi

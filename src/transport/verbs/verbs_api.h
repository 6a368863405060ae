// libibverbs (rdma-core), opened at run time with dlopen so that hetccl
// starts on machines without it: the verbs the RDMA network
// (verbs_network.cc) calls, bound once per process. Posting and polling go
// through the context's ops table, as verbs.h's inline ibv_post_send,
// ibv_post_recv and ibv_poll_cq do.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace hetccl {

struct VerbsApi {
  ibv_device** (*getDeviceList)(int* count);
  void (*freeDeviceList)(ibv_device** list);
  const char* (*getDeviceName)(ibv_device* device);
  ibv_context* (*openDevice)(ibv_device* device);
  int (*closeDevice)(ibv_context* context);
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr);
  // The exported ibv_query_port, as libibverbs declares it: it fills the
  // compatible head of an ibv_port_attr (verbs.h's own inline casts so too).
  int (*queryPort)(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr);
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  ibv_pd* (*allocPd)(ibv_context* context);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access);
  // Takes the optional access flags (relaxed ordering), masking those the
  // kernel lacks (rdma-core 29 and later; null before).
  ibv_mr* (*regMrIova2)(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access);
  // GPU memory exported as a dma-buf (rdma-core 34 and later; null before).
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
  int (*deregMr)(ibv_mr* mr);
  ibv_cq* (*createCq)(ibv_context* context, int entries, void* cqContext, ibv_comp_channel* channel, int vector);
  int (*destroyCq)(ibv_cq* cq);
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroyQp)(ibv_qp* qp);
  const char* (*wcStatusString)(ibv_wc_status status);

  static int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return qp->context->ops.post_send(qp, wr, bad); }
  static int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return qp->context->ops.post_recv(qp, wr, bad); }
  static int pollCq(ibv_cq* cq, int entries, ibv_wc* wc) { return cq->context->ops.poll_cq(cq, entries, wc); }
};

// The process's libibverbs (HETCCL_IB_LIB), loaded on the first call;
// nullptr and *why when it cannot be.
const VerbsApi* verbsApi(std::string* why);

}  // namespace hetccl

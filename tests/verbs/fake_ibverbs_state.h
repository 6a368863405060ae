// The stand-in libibverbs' state (fake_ibverbs.cc: the verbs; this and
// fake_ibverbs_wire.cc: how queue pairs reach each other). See
// fake_ibverbs.cc for what it emulates and checks.
#pragma once

#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fakeibv {

enum FrameType : uint32_t { kHello = 1, kOp = 2, kAck = 3 };

struct Frame {
  uint32_t type;
  uint32_t opcode;  // ibv_wr_opcode (kOp); hello: the sender's QPN
  uint64_t remoteAddr;  // hello: the sender's PSN
  uint32_t rkey;    // hello: the receiver's QPN
  uint32_t imm;
  uint64_t length;  // payload bytes after the frame (kOp)
  uint32_t status;  // kAck: ibv_wc_status
  uint32_t pad;
};

inline long envLong(const char* name, long fallback) {
  const char* v = getenv(name);
  return v ? strtol(v, nullptr, 0) : fallback;
}

struct FakeContext;
struct FakeQp;

struct Link {
  int fd = -1;
  FakeQp* qp = nullptr;   // null until a hello names it (incoming)
  bool outgoing = false;  // our QP's sends go out here; acks come back
  std::string out;        // bytes waiting for the socket
  std::vector<char> in;   // bytes read, not yet a whole frame
};

struct FakeMr {
  ibv_mr mr;
  int access;
};

struct FakeCq {
  ibv_cq cq;
  std::deque<ibv_wc> entries;
  bool overflowed = false;
};

struct SendWork {
  uint64_t wrId;
  ibv_wr_opcode opcode;
  bool signaled;
  uint64_t remoteAddr;
  uint32_t rkey, imm;
  std::vector<ibv_sge> sges;
};

struct FakeQp {
  ibv_qp qp;
  ibv_qp_cap cap;
  uint32_t destQpn = 0, rqPsn = 0, sqPsn = 0;
  ibv_gid destGid{};
  std::deque<SendWork> toSend;    // posted, not yet on the wire
  std::deque<SendWork> awaiting;  // on the wire, waiting for the peer's ack
  std::deque<uint64_t> receives;  // posted receive work request ids
  std::deque<std::vector<char>> arrived;  // frames (with payload) waiting to be applied in order
  Link* outLink = nullptr;
  Link* inLink = nullptr;
  bool linkDown = false;
};

struct FakeContext {
  ibv_context context;  // first: the caller's ibv_context* is ours
  int id = 0;
  int listenFd = -1;
  int wake[2] = {-1, -1};
  std::mutex mu;
  std::thread service;
  bool stop = false;
  std::map<uint32_t, FakeMr*> mrs;  // by key (lkey == rkey)
  std::map<uint32_t, FakeQp*> qps;
  std::vector<Link*> links;
  uint32_t nextKey = 0x100, nextQpn = 0x40;
  long sentBytes = 0, breakAfter = -1;
};

inline FakeContext* of(ibv_context* c) { return reinterpret_cast<FakeContext*>(c); }


// The wire (fake_ibverbs_wire.cc).
sockaddr_un socketName(uint32_t pid, uint32_t id, socklen_t* len);
ibv_gid gidOf(uint32_t pid, uint32_t id);
void wakeService(FakeContext* c);
void closeLink(FakeContext* c, Link* link);
bool writeLink(Link* link);
// The service thread of a context: moves everything, until c->stop.
void serve(FakeContext* c);

}  // namespace fakeibv

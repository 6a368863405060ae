// hetccl-perf's command line (tools/hetccl_perf.cc): nccl-tests' flags and
// hetccl's own (local ranks, domains, CPU ranks, plans, the cost model).
#pragma once

#include <getopt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/cluster.h"
#include "nccl.h"
#include "reference.h"

namespace perf {

using namespace hetccl::testing;

struct Options {
  std::vector<Collective> collectives;
  size_t minBytes = 8, maxBytes = 32 << 20;
  double factor = 2;
  size_t step = 0;
  int iters = 20, warmup = 5;
  int check = 1;
  std::vector<int> ops{ncclSum};
  std::vector<ncclDataType_t> types{ncclFloat32};
  int root = 0;
  int localRanks = 0;
  int perProcess = 1;                    // -g G: ranks (GPUs) driven by each process, in groups
  int domains = 0;                       // --domains K: -N ranks in K contiguous domains
  std::vector<std::string> domainList;   // --domain-list a,b,a,b: one domain name per local rank
  bool showPlan = false;                 // --plan: print the plan for each row
  hetccl::model::Cluster model;          // --model FILE: the cost model's estimate per row (perf_model.h)
  bool showModel = false;
  bool showHostTime = false;             // --host-time: the calling thread's time per call
  int hostRanks = 0;                     // --host-ranks K: the last K local ranks are CPU ranks
  int peerShift = 1;                     // --peer-shift S: sendrecv to rank+S, from rank-S
  int graphLaunches = 0;                 // -G L: the iterations captured in a CUDA graph, launched L times
};

inline size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

[[noreturn]] inline void usage(const char* msg) {
  if (msg) fprintf(stderr, "hetccl-perf: %s\n", msg);
  fprintf(stderr,
          "usage: hetccl-perf <collective>[,<collective>...] [options]\n"
          "  collectives: all_reduce broadcast reduce all_gather reduce_scatter alltoall gather scatter sendrecv\n"
          "               all_gather_v alltoallv (uneven blocks of 0 to the even size: about half the bytes shown)\n"
          "  -b <min bytes> -e <max bytes> -f <factor> -i <step bytes> -n <iters> -w <warmup iters>\n"
          "  -c <0|1> check results   -o <sum|prod|max|min|avg|mulsum|all>[,...]   -d <type|all>[,...]   -r <root>\n"
          "  -N <ranks> start this many local ranks (else mpirun/torchrun variables, else 1 rank)\n"
          "  -g <G>     each process drives G ranks (GPUs) from one thread, in groups (nccl-tests' -g)\n"
          "  -G <L>     capture the -n iterations in a CUDA graph, launch it L times (nccl-tests' -G; NVIDIA, -g 1)\n"
          "  --domains <K>          with -N: place the local ranks in K domains (contiguous blocks)\n"
          "  --domain-list <a,b,..> with -N: the domain of each local rank, in rank order\n"
          "  --host-ranks <K>       with -N: the last K local ranks are CPU ranks (HETCCL_DEVICE=host)\n"
          "  --plan                 print the plan hetccl runs for each collective and size\n"
          "  --model <cluster file> print the cost model's estimate beside each row (docs/simulator.md)\n"
          "  --host-time            print the calling thread's time per call (queuing only, no waiting)\n"
          "  --peer-shift <S>       sendrecv: each rank sends to rank+S and receives from rank-S (default 1)\n");
  exit(2);
}

// "a,b,c" -> {"a", "b", "c"}
inline std::vector<std::string> splitList(const std::string& list) {
  std::vector<std::string> items;
  for (size_t at = 0;;) {
    const size_t comma = list.find(',', at);
    items.push_back(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) return items;
    at = comma + 1;
  }
}

inline Options parse(int argc, char** argv) {
  Options o;
  if (argc < 2 || argv[1][0] == '-') usage("name the collective first");
  for (const std::string& name : splitList(argv[1])) {
    Collective c;
    if (!parseCollective(name, &c)) usage("unknown collective");
    o.collectives.push_back(c);
  }
  optind = 2;
  int ch;
  static const option longOptions[] = {{"domains", required_argument, nullptr, 1},
                                       {"domain-list", required_argument, nullptr, 2},
                                       {"plan", no_argument, nullptr, 3},
                                       {"host-ranks", required_argument, nullptr, 4},
                                       {"host-time", no_argument, nullptr, 5},
                                       {"peer-shift", required_argument, nullptr, 6},
                                       {"model", required_argument, nullptr, 7},
                                       {nullptr, 0, nullptr, 0}};
  while ((ch = getopt_long(argc, argv, "b:e:f:i:n:w:c:o:d:r:N:t:g:m:z:G:", longOptions, nullptr)) != -1) {
    switch (ch) {
      case 1: o.domains = atoi(optarg); break;
      case 4: o.hostRanks = atoi(optarg); break;
      case 2: {
        std::string l = optarg;
        size_t at = 0;
        while (at <= l.size()) {
          size_t comma = l.find(',', at);
          o.domainList.push_back(l.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
          if (comma == std::string::npos) break;
          at = comma + 1;
        }
        break;
      }
      case 3: o.showPlan = true; break;
      case 5: o.showHostTime = true; break;
      case 6: o.peerShift = atoi(optarg); break;
      case 7: {
        std::string error;
        if (!hetccl::model::loadCluster(optarg, &o.model, &error)) usage(error.c_str());
        o.showModel = true;
        break;
      }
      case 'b': o.minBytes = parseSize(optarg); break;
      case 'e': o.maxBytes = parseSize(optarg); break;
      case 'f': o.factor = atof(optarg); break;
      case 'i': o.step = parseSize(optarg); break;
      case 'n': o.iters = atoi(optarg); break;
      case 'w': o.warmup = atoi(optarg); break;
      case 'c': o.check = atoi(optarg); break;
      case 'r': o.root = atoi(optarg); break;
      case 'N': o.localRanks = atoi(optarg); break;
      case 'o': {
        o.ops.clear();
        if (!strcmp(optarg, "all")) o.ops = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, kPreMulSum};
        else {  // one op, or a comma-separated list
          for (const std::string& name : splitList(optarg)) {
            int op;
            if (!parseOp(name, &op)) usage("unknown op");
            o.ops.push_back(op);
          }
        }
        break;
      }
      case 'd': {
        o.types.clear();
        if (!strcmp(optarg, "all")) {
          for (int t = 0; t < ncclNumTypes; ++t) o.types.push_back(static_cast<ncclDataType_t>(t));
        } else {  // one type, or a comma-separated list
          for (const std::string& name : splitList(optarg)) {
            ncclDataType_t t;
            if (!parseType(name, &t)) usage("unknown type");
            o.types.push_back(t);
          }
        }
        break;
      }
      case 't':
        if (atoi(optarg) != 1) usage("-t (several threads) is not supported; use -g or -N");
        break;
      case 'g':
        o.perProcess = atoi(optarg);
        if (o.perProcess < 1) usage("-g needs at least 1");
        break;
      case 'G':
        o.graphLaunches = atoi(optarg);
        if (o.graphLaunches < 0) usage("-G needs 0 or more");
        break;
      case 'm': case 'z': break;  // accepted for nccl-tests compatibility, no effect
      default: usage(nullptr);
    }
  }
  if (o.iters < 1 || o.minBytes > o.maxBytes || (o.factor <= 1 && o.step == 0)) usage("bad size/iteration options");
  if (o.graphLaunches > 0 && o.perProcess > 1) usage("-G goes with one rank per process (-g 1)");
  if ((o.domains || !o.domainList.empty()) && o.localRanks <= 0) usage("--domains/--domain-list go with -N");
  if (!o.domainList.empty() && static_cast<int>(o.domainList.size()) != o.localRanks)
    usage("--domain-list needs one name per local rank");
  if (o.domains < 0 || o.domains > std::max(1, o.localRanks)) usage("--domains must be between 1 and -N");
  return o;
}

}  // namespace perf

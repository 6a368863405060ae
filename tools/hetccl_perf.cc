// hetccl-perf: collective benchmark in the style of nccl-tests.
//
//   hetccl-perf all_reduce -N 4 -b 8 -e 64M -f 2 -d float -o sum
//
// Ranks: -N n starts n local ranks itself. Otherwise the rank and size
// come from mpirun (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE) or torchrun
// (RANK/WORLD_SIZE) and the rendezvous from NCCL_COMM_ID (or MASTER_ADDR
// and MASTER_PORT+1 under torchrun); with none of these, one rank.

#include <algorithm>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>

#include "cuda_graphs.h"
#include "launcher.h"
#include "nccl.h"
#include "perf_buffers.h"
#include "perf_model.h"
#include "perf_options.h"
#include "reference.h"
#include "uneven.h"

using namespace hetccl::testing;
using perf::Options;

namespace {

double busFactor(Collective c, int n) {
  switch (c) {
    case Collective::AllReduce: return 2.0 * (n - 1) / n;
    case Collective::AllGather: case Collective::ReduceScatter: case Collective::AlltoAll:
    case Collective::Gather: case Collective::Scatter: case Collective::AllGatherV: case Collective::AlltoAllv:
      return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

// Per-rank count argument for a total size in bytes (nccl-tests' convention).
size_t countFor(Collective c, size_t bytes, size_t typeSize, int n) {
  switch (c) {
    case Collective::AllGather: case Collective::ReduceScatter: case Collective::AlltoAll:
    case Collective::Gather: case Collective::Scatter: case Collective::AllGatherV: case Collective::AlltoAllv:
      return bytes / typeSize / static_cast<size_t>(n);
    default: return bytes / typeSize;
  }
}

#define PERF_CHECK(call)                                                                          \
  do {                                                                                            \
    ncclResult_t r_ = (call);                                                                     \
    if (r_ != ncclSuccess) {                                                                      \
      fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, #call, ncclGetErrorString(r_), ncclGetLastError(comm)); \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

// hetccl's extensions, looked up at run time: the same tool also runs
// linked against another NCCL (hetccl-perf-nccl), for side-by-side runs.
template <typename Fn>
Fn extension(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

std::string libraryName() {
  if (auto version = extension<const char* (*)()>("hetcclVersionString")) return version();
  int v = 0;
  ncclGetVersion(&v);
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

struct Runner {
  int rank, n;
  ncclComm_t comm;
  char *send, *recv;
  cudaStream_t stream;

  ncclResult_t launch(const Case& k, ncclRedOp_t op, bool inPlace) {
    const size_t es = typeBytes(k.type), cb = k.count * es;
    const void* s = send;
    void* r = inPlace ? send : recv;
    switch (k.coll) {
      case Collective::AllReduce: return ncclAllReduce(s, r, k.count, k.type, op, comm, stream);
      case Collective::Broadcast: return ncclBroadcast(s, r, k.count, k.type, k.root, comm, stream);
      case Collective::Reduce: return ncclReduce(s, r, k.count, k.type, op, k.root, comm, stream);
      case Collective::AllGather:
        return ncclAllGather(inPlace ? send + rank * cb : s, r, k.count, k.type, comm, stream);
      case Collective::ReduceScatter:
        return ncclReduceScatter(s, inPlace ? send + rank * cb : r, k.count, k.type, op, comm, stream);
      case Collective::AlltoAll: return ncclAlltoAll(s, r, k.count, k.type, comm, stream);
      case Collective::Gather:
        return ncclGather(inPlace ? send + rank * cb : s, r, k.count, k.type, k.root, comm, stream);
      case Collective::Scatter:
        return ncclScatter(s, inPlace ? send + rank * cb : r, k.count, k.type, k.root, comm, stream);
      case Collective::SendRecv: {
        ncclGroupStart();
        ncclSend(s, k.count, k.type, ((rank + k.shift) % n + n) % n, comm, stream);
        ncclRecv(r, k.count, k.type, ((rank - k.shift) % n + n) % n, comm, stream);
        return ncclGroupEnd();
      }
      case Collective::AllGatherV: case Collective::AlltoAllv:
        return launchUneven(comm, k, rank, send, recv, inPlace, stream);
    }
    return ncclInternalError;
  }

  // Where the rank's input goes: in-place all-gather and gather take it at
  // the rank's slot of the output buffer.
  char* inputOf(const Case& k, bool inPlace) const {
    if (inPlace && (k.coll == Collective::AllGather || k.coll == Collective::Gather))
      return send + rank * k.count * typeBytes(k.type);
    if (inPlace && k.coll == Collective::AllGatherV) return send + unevenInPlaceOffset(k, rank) * typeBytes(k.type);
    return send;
  }

  // Where the rank's result lands for the in-place variant.
  const char* resultOf(const Case& k, bool inPlace) const {
    if (!inPlace) return recv;
    if (k.coll == Collective::ReduceScatter || k.coll == Collective::Scatter)
      return send + rank * k.count * typeBytes(k.type);
    return send;
  }
};

// One rank driven by this process: its buffers, communicator and runner.
struct LocalRank {
  int rank = 0;
  PerfBuffers buf;
  ncclComm_t comm = nullptr;
  Runner run{};
  ncclRedOp_t op = ncclSum;
};

// Runs `calls(r)` for every local rank, inside one group when there are
// several (one thread driving several ranks, as nccl-tests' -g does).
template <typename Fn>
ncclResult_t forEachRank(std::vector<LocalRank>& ranks, Fn&& calls) {
  const bool group = ranks.size() > 1;
  if (group) ncclGroupStart();
  ncclResult_t first = ncclSuccess;
  for (LocalRank& r : ranks) {
    const ncclResult_t e = calls(r);
    if (e != ncclSuccess && first == ncclSuccess) first = e;
  }
  if (group) {
    const ncclResult_t e = ncclGroupEnd();
    if (e != ncclSuccess && first == ncclSuccess) first = e;
  }
  return first;
}

#define PERF_CHECK_ALL(call)                                                                        \
  do {                                                                                              \
    ncclResult_t r_ = (call);                                                                       \
    if (r_ != ncclSuccess) {                                                                        \
      fprintf(stderr, "rank %d: %s failed: %s: %s\n", first, #call, ncclGetErrorString(r_),        \
              ncclGetLastError(nullptr));                                                           \
      return 1;                                                                                     \
    }                                                                                               \
  } while (0)

// Ranks first .. first+perProcess-1 of n, on local devices
// localBase*perProcess + j.
int runRanks(const Options& o, int first, int perProcess, int n, int localBase, const ncclUniqueId& id) {
  size_t maxElems = 0;
  for (auto t : o.types) {
    for (auto c : o.collectives) {
      size_t cnt = countFor(c, o.maxBytes, typeBytes(t), n);
      maxElems = std::max({maxElems, sendElements(c, cnt, n) * typeBytes(t), recvElements(c, cnt, n) * typeBytes(t)});
    }
  }
  std::vector<LocalRank> ranks(static_cast<size_t>(perProcess));
  for (int j = 0; j < perProcess; ++j) {
    ranks[j].rank = first + j;
    if (!ranks[j].buf.open(localBase * perProcess + j, maxElems + 64)) {
      fprintf(stderr, "rank %d: cannot set up device buffers\n", first + j);
      return 1;
    }
  }
  // Each rank's communicator on its device (the current one at the call).
  PERF_CHECK_ALL(forEachRank(ranks, [&](LocalRank& r) {
    r.buf.makeCurrent();
    return ncclCommInitRank(&r.comm, n, id, r.rank);
  }));
  for (LocalRank& r : ranks) r.run = Runner{r.rank, n, r.comm, r.buf.send(), r.buf.recv(), r.buf.stream()};
  // A collective on one host value per rank (through device memory on GPU
  // ranks); every local rank ends with the same value, returned.
  auto exchange = [&](auto value, ncclDataType_t type, ncclRedOp_t op, bool broadcast) {
    std::vector<decltype(value)> values(ranks.size(), value);
    ncclResult_t r = ncclSuccess;
    for (size_t j = 0; j < ranks.size() && r == ncclSuccess; ++j) r = ranks[j].buf.stage(&values[j], sizeof(value));
    if (r == ncclSuccess)
      r = forEachRank(ranks, [&](LocalRank& l) {
        void* p = l.buf.control();
        return broadcast ? ncclBroadcast(p, p, 1, type, 0, l.comm, l.buf.stream())
                         : ncclAllReduce(p, p, 1, type, op, l.comm, l.buf.stream());
      });
    for (size_t j = 0; j < ranks.size(); ++j) ranks[j].buf.unstage(&values[j], sizeof(value));
    return std::make_pair(r, values[0]);
  };
  auto [seedResult, seed] = exchange(runSeed(), ncclUint64, ncclSum, true);  // rank 0's seed, for every rank
  PERF_CHECK_ALL(seedResult);
  // The all-reduce that aligns the ranks and takes the slowest time, once
  // before any size: its first call connects peers the timed collective may
  // not use, and that cost must not land in the first size's time (a
  // broadcast of 1 KiB among three ranks: 3.3-3.9 us a call, 0.9 after).
  PERF_CHECK_ALL(exchange(0.0, ncclFloat64, ncclSum, false).first);
  const bool printer = first == 0;
  uint64_t totalWrong = 0;
  double busSum = 0;
  int rows = 0;
  PerfBuffers& buf0 = ranks[0].buf;
  if (printer) {
    printf("# hetccl-perf: %s, %d rank(s)%s, %s\n", libraryName().c_str(), n,
           perProcess > 1 ? (", " + std::to_string(perProcess) + " per process").c_str() : "",
           buf0.gpu() ? (std::string(buf0.runtimeName()) + " GPU ranks").c_str() : "host (CPU) ranks");
    if (auto domains = extension<const char* (*)(ncclComm_t)>("hetcclCommDescribeDomains"))
      printf("# domains: %s\n", domains(ranks[0].comm));
    printf("# iters %d, warmup %d, check %d, seed %llu\n", o.iters, o.warmup, o.check,
           static_cast<unsigned long long>(seed));
  }
  auto launchAll = [&](const Case& k, bool inPlace) {
    return forEachRank(ranks, [&](LocalRank& r) { return r.run.launch(k, r.op, inPlace); });
  };
  // -G: each row's iterations captured in a CUDA graph and launched
  // o.graphLaunches times (after one launch to warm up). A process that
  // cannot capture (a CPU rank, no CUDA graphs) makes the same calls
  // eagerly, so its peers' replays meet them.
  const gpu_test::CudaGraphs cudaGraphs = o.graphLaunches > 0 && buf0.gpu() ? gpu_test::cudaGraphs() : gpu_test::CudaGraphs{};
  const bool captures = cudaGraphs.ok && strcmp(buf0.runtimeName(), "cuda") == 0;
  const int launches = std::max(1, o.graphLaunches), warmLaunches = o.graphLaunches > 0 && o.warmup > 0 ? 1 : 0;
  if (o.graphLaunches > 0 && printer)
    printf("# CUDA graphs: the %d iterations captured, launched %d times%s\n", o.iters, o.graphLaunches,
           captures ? "" : " (not on this process's ranks: no CUDA graphs here, they call eagerly)");
  // The iterations of `times` graph launches, called eagerly.
  auto eagerIterations = [&](const Case& k, bool inPlace, int times) -> ncclResult_t {
    for (int it = 0; it < o.iters * times; ++it)
      if (ncclResult_t r = launchAll(k, inPlace); r != ncclSuccess) return r;
    return ncclSuccess;
  };
  auto synchronizeAll = [&] {
    for (LocalRank& r : ranks) r.buf.synchronize();
  };
  for (auto coll : o.collectives) {
    if (printer) {
      printf("#\n# %s\n", collectiveName(coll));
      printf("# %10s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s\n", "", "", "", "", "", "out-of-place", "", "",
             "", "in-place", "", "", "");
      printf("# %10s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s\n", "size", "count", "type", "redop", "root",
             "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
      printf("# %10s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
             "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    }
    for (auto type : o.types) {
      std::vector<int> ops = collectiveReduces(coll) ? o.ops : std::vector<int>{-1};
      for (int opv : ops) {
        Case k;
        k.coll = coll;
        k.type = type;
        k.op = opv < 0 ? ncclSum : opv;
        k.root = collectiveRooted(coll) ? o.root : -1;
        k.shift = o.peerShift;
        k.nranks = n;
        for (LocalRank& r : ranks) {
          r.op = opv >= 0 && opv != kPreMulSum ? static_cast<ncclRedOp_t>(opv) : ncclSum;
          if (opv == kPreMulSum) {
            char scalar[8];
            writeScalar(type, preMulScalar(k, r.rank), scalar);
            PERF_CHECK_ALL(ncclRedOpCreatePreMulSum(&r.op, scalar, type, ncclScalarHostImmediate, r.comm));
          }
        }
        if (k.root >= n) k.root = 0;
        for (size_t bytes = o.minBytes; bytes <= o.maxBytes;
             bytes = o.step ? bytes + o.step : static_cast<size_t>(std::max<double>(bytes + 1, bytes * o.factor))) {
          k.count = countFor(coll, bytes, typeBytes(type), n);
          const size_t totalBytes = (coll == Collective::AllReduce || coll == Collective::Broadcast ||
                                     coll == Collective::Reduce || coll == Collective::SendRecv)
                                        ? k.count * typeBytes(type)
                                        : k.count * typeBytes(type) * n;
          double times[2] = {0, 0}, hostTimes[2] = {0, 0};
          uint64_t wrong[2] = {0, 0};
          for (int inPlace = 0; inPlace < 2; ++inPlace) {
            if (inPlace && (coll == Collective::SendRecv || coll == Collective::AlltoAllv)) continue;
            k.seed = seed + bytes * 2 + inPlace;
            for (LocalRank& r : ranks) {
              fillInput(k, r.rank, r.buf.mirrorOf(r.run.inputOf(k, inPlace)));
              r.buf.upload();
            }
            for (int w = 0; w < o.warmup; ++w) PERF_CHECK_ALL(launchAll(k, inPlace));
            synchronizeAll();
            void *graph = nullptr, *exec = nullptr;
            void* stream = ranks[0].buf.stream();
            if (o.graphLaunches > 0 && captures) {
              if (cudaGraphs.begin(stream, gpu_test::kCaptureModeGlobal) != 0) {
                fprintf(stderr, "rank %d: cudaStreamBeginCapture failed\n", first);
                return 1;
              }
              ncclResult_t captured = ncclSuccess;
              for (int it = 0; it < o.iters && captured == ncclSuccess; ++it) captured = launchAll(k, inPlace);
              const int ended = cudaGraphs.end(stream, &graph);
              PERF_CHECK_ALL(captured);
              if (ended != 0 || !graph || cudaGraphs.instantiate(&exec, graph, 0) != 0) {
                fprintf(stderr, "rank %d: the captured graph could not be made (%d)\n", first, ended);
                return 1;
              }
              for (int w = 0; w < warmLaunches; ++w) cudaGraphs.launch(exec, stream);
            } else {
              PERF_CHECK_ALL(eagerIterations(k, inPlace, warmLaunches));  // the peers' warm-up launches
            }
            synchronizeAll();
            // Align the ranks, then time the iterations (to the end of the
            // last one on the streams, as nccl-tests does).
            PERF_CHECK_ALL(exchange(0.0, ncclFloat64, ncclSum, false).first);
            const int calls = o.iters * launches;
            auto t0 = std::chrono::steady_clock::now();
            if (exec) {
              for (int l = 0; l < launches; ++l)
                if (cudaGraphs.launch(exec, stream) != 0) {
                  fprintf(stderr, "rank %d: cudaGraphLaunch failed\n", first);
                  return 1;
                }
            } else {
              PERF_CHECK_ALL(eagerIterations(k, inPlace, launches));
            }
            hostTimes[inPlace] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
            synchronizeAll();
            const double mine = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
            if (exec) cudaGraphs.execDestroy(exec);
            if (graph) cudaGraphs.destroy(graph);
            auto [timeResult, us] = exchange(mine, ncclFloat64, ncclMax, false);
            PERF_CHECK_ALL(timeResult);
            times[inPlace] = us;
            if (o.check) {
              // Fresh inputs, one more call, compare with the reference.
              for (LocalRank& r : ranks) {
                if (inPlace && isUneven(coll))  // the gaps between the blocks must stay poison
                  poison(type, r.buf.mirrorOf(r.run.send), recvElements(coll, k.count, n));
                fillInput(k, r.rank, r.buf.mirrorOf(r.run.inputOf(k, inPlace)));
                if (!inPlace) poison(type, r.buf.hostRecv(), recvElements(coll, k.count, n));
                r.buf.upload();
              }
              PERF_CHECK_ALL(launchAll(k, inPlace));
              uint64_t bad = 0;
              for (LocalRank& r : ranks) {
                r.buf.synchronize();
                r.buf.download();
                std::string err;
                const uint64_t b = countWrong(k, r.rank, r.buf.mirrorOf(r.run.resultOf(k, inPlace)), &err);
                if (b) fprintf(stderr, "rank %d: %s\n", r.rank, err.c_str());
                bad += b;
              }
              auto [wrongResult, all] = exchange(bad, ncclUint64, ncclSum, false);
              PERF_CHECK_ALL(wrongResult);
              wrong[inPlace] = all;
              totalWrong += all;
            }
          }
          const double factor = busFactor(coll, n);
          if (printer) {
            auto algbw = [&](double us) { return us > 0 ? totalBytes / us / 1e3 : 0.0; };
            printf("  %10zu %12zu %8s %6s %6d %9.1f %8.2f %8.2f %6s", totalBytes, totalBytes / typeBytes(type),
                   typeLabel(type), collectiveReduces(coll) ? opLabel(k.op) : "none", k.root, times[0], algbw(times[0]),
                   algbw(times[0]) * factor, o.check ? std::to_string(wrong[0]).c_str() : "N/A");
            if (coll == Collective::SendRecv || coll == Collective::AlltoAllv)
              printf(" %9s %8s %8s %6s\n", "N/A", "N/A", "N/A", "N/A");
            else
              printf(" %9.1f %8.2f %8.2f %6s\n", times[1], algbw(times[1]), algbw(times[1]) * factor,
                     o.check ? std::to_string(wrong[1]).c_str() : "N/A");
            using DescribePlan = const char* (*)(ncclComm_t, const char*, size_t, ncclDataType_t);
            if (o.showHostTime)  // this process's ranks' calls; the GPU time is the row's
              printf("#   host: %.2f / %.2f us per call (out-of-place / in-place), issuing only\n", hostTimes[0],
                     hostTimes[1]);
            if (o.showPlan)
              if (auto plan = extension<DescribePlan>("hetcclCommDescribePlan"))
                printf("#   plan: %s\n", plan(ranks[0].comm, collectiveName(coll), k.count, type));
            if (o.showModel) perf_model::print(o.model, collectiveName(coll), static_cast<double>(totalBytes));
            fflush(stdout);
          }
          busSum += (times[0] > 0 ? totalBytes / times[0] / 1e3 : 0.0) * factor;
          ++rows;
          if (bytes == o.maxBytes) break;
        }
        if (opv == kPreMulSum)
          for (LocalRank& r : ranks) PERF_CHECK_ALL(ncclRedOpDestroy(r.op, r.comm));
      }
    }
  }
  if (printer) {
    printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(totalWrong), totalWrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g\n#\n", rows ? busSum / rows : 0.0);
  }
  for (LocalRank& r : ranks) PERF_CHECK_ALL(ncclCommDestroy(r.comm));
  return totalWrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = perf::parse(argc, argv);
  if (o.localRanks > 0) {
    auto placeInDomain = [&](int rank) {
      if (rank >= o.localRanks - o.hostRanks) setenv("HETCCL_DEVICE", "host", 1);
      if (!o.domainList.empty()) setenv("HETCCL_DOMAIN", o.domainList[rank].c_str(), 1);
      else if (o.domains > 0) setenv("HETCCL_DOMAIN", ("d" + std::to_string(rank * o.domains / o.localRanks)).c_str(), 1);
    };
    LaunchResult r = launchLocalRanks(
        o.localRanks,
        [&](int p, int n, const ncclUniqueId& id) { return runRanks(o, p * o.perProcess, o.perProcess, n * o.perProcess, p, id); },
        3600,
        placeInDomain);
    if (!r.allPassed()) {
      for (size_t i = 0; i < r.exitCodes.size(); ++i)
        if (r.exitCodes[i]) fprintf(stderr, "hetccl-perf: rank %zu exited with %d\n", i, r.exitCodes[i]);
      return 1;
    }
    return 0;
  }
  auto envInt = [](const char* a, const char* b, const char* c, int fallback) {
    for (const char* name : {a, b, c})
      if (name && getenv(name)) return atoi(getenv(name));
    return fallback;
  };
  const int rank = envInt("OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", 0);
  const int size = envInt("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE", 1);
  if (size > 1 && !getenv("NCCL_COMM_ID")) {
    const char* addr = getenv("MASTER_ADDR");
    const char* port = getenv("MASTER_PORT");
    if (!addr || !port) {
      fprintf(stderr, "hetccl-perf: %d ranks: set NCCL_COMM_ID=host:port (or run under torchrun)\n", size);
      return 2;
    }
    std::string id = std::string(addr) + ":" + std::to_string(atoi(port) + 1);
    setenv("NCCL_COMM_ID", id.c_str(), 1);
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "hetccl-perf: ncclGetUniqueId failed: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  const int localRank = envInt("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK", rank);
  return runRanks(o, rank * o.perProcess, o.perProcess, size * o.perProcess, localRank, id);
}

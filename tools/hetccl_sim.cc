// hetccl-sim: what hetccl's cross-domain plans would cost on a cluster
// that is not at hand (src/model/cost_model.h; GPU ranks: its stream
// engines, src/model/steps/stream_engine.h), from a cluster file
// (docs/simulator.md; examples/clusters/). For each collective and size:
// every plan's predicted time and bus bandwidth, and the plan the model
// picks; for a [training] section, the data-parallel step and its
// efficiency against the sum of the GPUs' own throughputs.
//
//   hetccl-sim examples/clusters/paper_testbed.cluster
//   hetccl-sim FILE -c all_reduce,all_gather -b 1K -e 1G -f 4 --csv
//   hetccl-sim --built-in-figures 16   (the library's own figures as a file)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "model/cluster.h"
#include "model/cost_model.h"
#include "model/steps/domain_library.h"
#include "model/steps/stream_engine.h"
#include "model/figures.h"

namespace {

using namespace hetccl::model;

void usage() {
  fprintf(stderr,
          "usage: hetccl-sim <cluster file> [options]\n"
          "       hetccl-sim --built-in-figures <cores>: the figures the library plans with, unless\n"
          "                         HETCCL_MODEL_FILE names others, as a cluster file (CPU ranks on a host of <cores>)\n"
          "  -c <collective>[,...]  all_reduce reduce_scatter all_gather broadcast reduce (default: all)\n"
          "  -b <bytes> -e <bytes> -f <factor>   sizes, as nccl-tests (default 8 to 1G, x4; K, M, G suffixes)\n"
          "  --piece-bytes <bytes>  a pipelined plan's piece (hetccl's: HETCCL_CHUNK_BYTES);\n"
          "                         by default the model picks the best power of two\n"
          "  --csv                  one line per collective, size and plan\n");
}

bool bytesOf(const char* text, double* out) {
  char* end = nullptr;
  double v = strtod(text, &end);
  if (end == text || v < 0) return false;
  if (*end == 'K' || *end == 'k') v *= 1024, ++end;
  else if (*end == 'M' || *end == 'm') v *= 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024, ++end;
  if (*end != '\0') return false;
  *out = v;
  return true;
}

std::string sizeLabel(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char text[32];
  snprintf(text, sizeof text, "%g %s", b, units[u]);
  return text;
}

void describe(const Cluster& c) {
  printf("# cluster: %s (%d ranks on %d nodes; NICs %g Gb/s, %g us, oversubscription %g)\n", c.name.c_str(), c.ranks(),
         c.nodes(), c.network.nicGbps, c.network.latencyUs, c.network.oversubscription);
  for (const DomainSpec& d : c.domains) {
    // The library's figures are one node's; across nodes the model caps and lengthens them.
    const LibraryFigures across = libraryAcrossNodes(c, d);
    char text[160];
    if (d.vendor != Vendor::Cpu && d.nodes > 1)
      snprintf(text, sizeof text, "library %g GB/s busbw %g us on a node, %g GB/s %g us across its nodes", d.libraryBusGBs,
               d.libraryLatencyUs, across.busGBs, across.latencyUs);
    else
      snprintf(text, sizeof text, "library %g GB/s busbw %g us", d.libraryBusGBs, d.libraryLatencyUs);
    printf("#   domain %s: %s, %d nodes x %d GPUs, %d NICs per node, %s, %s\n", d.name.c_str(), vendorName(d.vendor), d.nodes,
           d.gpusPerNode, d.nicsPerNode, text,
           d.vendor == Vendor::Cpu ? "host memory"
           : d.gpuDirect           ? "NICs on GPU memory (the host path's plans: a what-if)"
                                   : ("host-staged, " + std::to_string(static_cast<int>(d.pcieGBs)) + " GB/s PCIe").c_str());
  }
  if (streamEnginesRun(c))
    printf("#   GPU ranks: hetccl's stream engines take every collective (stream); leaders and hierarchical are\n"
           "#   the host path's plans, which they run host-staged with HETCCL_STREAM_COLLECTIVES=0 and\n"
           "#   HETCCL_STREAM_HIERARCHY=0 (gpudirect = yes: a what-if, *)\n");
}

void training(const Cluster& c, const ModelSettings& s) {
  printf("\n# data-parallel training: %g parameters, %g bytes per gradient, global batch %g, overlap %g\n",
         c.training.parameters, c.training.bytesPerGradient, c.training.globalBatch, c.training.overlap);
  printf("#   %-9s %12s %14s %12s %14s %12s\n", "batches", "compute (s)", "all-reduce (s)", "step (s)", "samples/s",
         "efficiency");
  for (bool balanced : {false, true}) {
    const TrainingEstimate t = estimateTraining(c, balanced, s);
    printf("    %-9s %12.4f %14.4f %12.4f %14.1f %12.3f\n", balanced ? "balanced" : "equal", t.computeSeconds,
           t.allReduceSeconds, t.stepSeconds, t.samplesPerSecond, t.efficiency);
  }
  printf("#   efficiency: samples/s against the sum of every GPU's own (%g samples/s)\n",
         estimateTraining(c, true, s).sumOfParts);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "--built-in-figures")) {
    const long cores = argc == 3 ? strtol(argv[2], nullptr, 10) : 0;
    if (cores <= 0) {
      usage();
      return 2;
    }
    fputs(clusterFileOf(builtInFigures(static_cast<uint32_t>(cores))).c_str(), stdout);
    return 0;
  }
  std::vector<Collective> colls;
  double minBytes = 8, maxBytes = 1024.0 * 1024 * 1024, factor = 4;
  ModelSettings settings;
  bool csv = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto bad = [&](const char* what) {
      fprintf(stderr, "hetccl-sim: %s: %s\n", a.c_str(), what);
      return 2;
    };
    if (a == "--csv") {
      csv = true;
      continue;
    }
    if (!v) return bad("needs a value");
    ++i;
    if (a == "-c") {
      std::string list = v;
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        Collective c;
        if (!collectiveByName(list.substr(at, comma - at), &c)) return bad("unknown collective");
        colls.push_back(c);
        at = comma + 1;
      }
    } else if (a == "-b" || a == "-e" || a == "--piece-bytes") {
      double b = 0;
      if (!bytesOf(v, &b) || b <= 0) return bad("not a size");
      (a == "-b" ? minBytes : a == "-e" ? maxBytes : settings.pieceBytes) = b;
    } else if (a == "-f") {
      factor = strtod(v, nullptr);
      if (factor <= 1) return bad("the factor must be above 1");
    } else {
      usage();
      return 2;
    }
  }
  if (colls.empty())
    for (int i = 0; i < kCollectives; ++i) colls.push_back(static_cast<Collective>(i));
  Cluster cluster;
  std::string error;
  if (!loadCluster(argv[1], &cluster, &error)) {
    fprintf(stderr, "hetccl-sim: %s\n", error.c_str());
    return 1;
  }
  if (csv) printf("collective,bytes,plan,hetccl_runs_it,chosen,seconds,busbw_gbs,piece_bytes\n");
  else describe(cluster);
  for (Collective coll : colls) {
    if (!csv) {
      printf("\n# %s: time (us) and busbw (GB/s) per plan; flat is the host-staged ring (reference)\n",
             collectiveName(coll));
      printf("#%13s %22s %22s %22s %22s   %s\n", "size", "leaders", "hierarchical", "flat (reference)", "stream", "choice");
    }
    for (double b = minBytes; b <= maxBytes; b *= factor) {
      const std::vector<Estimate> all = estimateAll(cluster, coll, b, settings);
      const Estimate best = choose(cluster, coll, b, settings);
      if (csv) {
        for (const Estimate& e : all)
          printf("%s,%.0f,%s,%d,%d,%.9g,%.6g,%.0f\n", collectiveName(coll), b, planName(e.plan), e.hetcclRunsIt ? 1 : 0,
                 e.hetcclRunsIt && e.plan == best.plan ? 1 : 0, e.seconds, e.busGBs, e.pieceBytes);
        continue;
      }
      printf("%14s", sizeLabel(b).c_str());
      for (const Estimate& e : all) {
        if (e.plan == Plan::Stream && !e.hetcclRunsIt) printf(" %21s ", "-");
        else printf(" %12.1f %8.2f%s", e.seconds * 1e6, e.busGBs, e.hetcclRunsIt ? " " : "*");
      }
      // One domain: hetccl passes the call to the vendor library, whichever plan.
      printf("   %s", cluster.domains.size() == 1 ? "the library (one domain)" : planName(best.plan));
      if (best.plan == Plan::Stream)
        printf(" (%s)", protocolName(crossProtocol(cluster, crossGroupCollective(cluster, coll), crossGroupBytes(cluster, b))));
      if (best.pieceBytes > 0 && best.pieceBytes < b) printf(" (pieces of %s)", sizeLabel(best.pieceBytes).c_str());
      printf("\n");
    }
  }
  if (!csv) printf("\n# (* not a plan hetccl runs for this collective; - the stream engines take only GPU ranks)\n");
  if (!csv && cluster.training.present) training(cluster, settings);
  return 0;
}

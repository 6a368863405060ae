#include "model/domain_library.h"

#include "model/cost_model.h"

namespace hetccl::model {

Library library(const Cluster& c, const DomainSpec& d, double chunk) {
  constexpr double kGB = 1e9, kUs = 1e-6;
  const LibraryFigures f = libraryAcrossNodes(c, d);
  const bool cpu = d.vendor == Vendor::Cpu;
  return Library{double(d.ranks()), f.busGBs * kGB, f.copyGBs * kGB, f.latencyUs * kUs, cpu ? chunk : 0,
                 cpu && c.network.gapUs > 0 ? c.network.gapUs * kUs : f.latencyUs * kUs, d.reduceGBs * kGB, f.rsGBs * kGB};
}

}  // namespace hetccl::model

#include "model/steps/domain_library.h"

#include <algorithm>
#include <cmath>

#include "model/steps/fabric.h"

namespace hetccl::model {

namespace {
constexpr double kGB = 1e9, kUs = 1e-6;
}  // namespace

LibraryFigures libraryAcrossNodes(const Cluster& c, const DomainSpec& d) {
  LibraryFigures f{d.libraryBusGBs, d.libraryCopyGBs > 0 ? d.libraryCopyGBs : d.libraryBusGBs, d.libraryLatencyUs,
                   d.libraryRsGBs > 0 ? d.libraryRsGBs : d.libraryBusGBs};
  if (d.vendor == Vendor::Cpu || d.nodes <= 1) return f;
  const double nics = nodeNics(c, d) / kGB;
  f.busGBs = std::min(f.busGBs, nics);
  f.copyGBs = std::min(f.copyGBs, nics);
  f.rsGBs = std::min(f.rsGBs, nics);
  f.latencyUs += 2 * std::ceil(std::log2(static_cast<double>(d.nodes))) * c.network.latencyUs;
  return f;
}

Library library(const Cluster& c, const DomainSpec& d, double chunk) {
  const LibraryFigures f = libraryAcrossNodes(c, d);
  const bool cpu = d.vendor == Vendor::Cpu;
  return Library{double(d.ranks()), f.busGBs * kGB, f.copyGBs * kGB, f.latencyUs * kUs, cpu ? chunk : 0,
                 cpu && c.network.gapUs > 0 ? c.network.gapUs * kUs : f.latencyUs * kUs, d.reduceGBs * kGB, f.rsGBs * kGB,
                 cpu ? d.libraryStepUs * kUs : 0};
}

}  // namespace hetccl::model

#include "model/cluster.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

namespace hetccl::model {

const char* vendorName(Vendor v) {
  switch (v) {
    case Vendor::Nvidia: return "nvidia";
    case Vendor::Amd: return "amd";
    default: return "cpu";
  }
}

int Cluster::ranks() const {
  int n = 0;
  for (const DomainSpec& d : domains) n += d.ranks();
  return n;
}

int Cluster::nodes() const {
  int n = 0;
  for (const DomainSpec& d : domains) n += d.nodes;
  return n;
}

namespace {

enum class Section { Top, Network, Domain, Training };

// One key of a section: how its value is read into the cluster.
struct Field {
  Section section;
  const char* key;
  std::function<bool(Cluster&, const std::string& value, std::string* why)> set;
};

bool number(const std::string& v, double* out, std::string* why) {
  errno = 0;
  char* end = nullptr;
  const double d = strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno != 0 || !std::isfinite(d)) {
    *why = "'" + v + "' is not a number";
    return false;
  }
  *out = d;
  return true;
}

bool whole(const std::string& v, int* out, std::string* why) {
  double d = 0;
  if (!number(v, &d, why)) return false;
  if (d != std::floor(d) || d < 0 || d > 1e7) {
    *why = "'" + v + "' is not a whole number of at most 10^7";
    return false;
  }
  *out = static_cast<int>(d);
  return true;
}

bool yesNo(const std::string& v, bool* out, std::string* why) {
  if (v == "yes" || v == "true" || v == "1") *out = true;
  else if (v == "no" || v == "false" || v == "0") *out = false;
  else {
    *why = "'" + v + "' is not yes or no";
    return false;
  }
  return true;
}

DomainSpec& last(Cluster& c) { return c.domains.back(); }

template <typename T>
auto numberInto(T member) {
  return [member](Cluster& c, const std::string& v, std::string* why) { return number(v, &member(c), why); };
}
template <typename T>
auto wholeInto(T member) {
  return [member](Cluster& c, const std::string& v, std::string* why) { return whole(v, &member(c), why); };
}

const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      {Section::Top, "name", [](Cluster& c, const std::string& v, std::string*) { c.name = v; return true; }},
      {Section::Network, "nic_gbps", numberInto([](Cluster& c) -> double& { return c.network.nicGbps; })},
      {Section::Network, "one_way_gbps", numberInto([](Cluster& c) -> double& { return c.network.oneWayGbps; })},
      {Section::Network, "latency_us", numberInto([](Cluster& c) -> double& { return c.network.latencyUs; })},
      {Section::Network, "oversubscription", numberInto([](Cluster& c) -> double& { return c.network.oversubscription; })},
      {Section::Network, "nodes_per_leaf", wholeInto([](Cluster& c) -> int& { return c.network.nodesPerLeaf; })},
      {Section::Network, "eager_bytes", numberInto([](Cluster& c) -> double& { return c.network.eagerBytes; })},
      {Section::Network, "handoff_us", numberInto([](Cluster& c) -> double& { return c.network.handoffUs; })},
      {Section::Network, "gap_us", numberInto([](Cluster& c) -> double& { return c.network.gapUs; })},
      {Section::Network, "further_message_us", numberInto([](Cluster& c) -> double& { return c.network.furtherUs; })},
      {Section::Network, "one_host",
       [](Cluster& c, const std::string& v, std::string* why) { return yesNo(v, &c.network.oneHost, why); }},
      {Section::Network, "one_gpu",
       [](Cluster& c, const std::string& v, std::string* why) { return yesNo(v, &c.network.oneGpu, why); }},
      {Section::Domain, "vendor",
       [](Cluster& c, const std::string& v, std::string* why) {
         for (Vendor k : {Vendor::Nvidia, Vendor::Amd, Vendor::Cpu})
           if (v == vendorName(k)) {
             last(c).vendor = k;
             return true;
           }
         *why = "unknown vendor '" + v + "' (nvidia, amd or cpu)";
         return false;
       }},
      {Section::Domain, "nodes", wholeInto([](Cluster& c) -> int& { return last(c).nodes; })},
      {Section::Domain, "gpus_per_node", wholeInto([](Cluster& c) -> int& { return last(c).gpusPerNode; })},
      {Section::Domain, "nics_per_node", wholeInto([](Cluster& c) -> int& { return last(c).nicsPerNode; })},
      {Section::Domain, "library_busbw_gbs", numberInto([](Cluster& c) -> double& { return last(c).libraryBusGBs; })},
      {Section::Domain, "library_copy_gbs", numberInto([](Cluster& c) -> double& { return last(c).libraryCopyGBs; })},
      {Section::Domain, "library_rs_gbs", numberInto([](Cluster& c) -> double& { return last(c).libraryRsGBs; })},
      {Section::Domain, "library_latency_us", numberInto([](Cluster& c) -> double& { return last(c).libraryLatencyUs; })},
      {Section::Domain, "library_step_us", numberInto([](Cluster& c) -> double& { return last(c).libraryStepUs; })},
      {Section::Domain, "pcie_gbs", numberInto([](Cluster& c) -> double& { return last(c).pcieGBs; })},
      {Section::Domain, "staging_us", numberInto([](Cluster& c) -> double& { return last(c).stagingUs; })},
      {Section::Domain, "stream_ll_us", numberInto([](Cluster& c) -> double& { return last(c).streamLowLatencyUs; })},
      {Section::Domain, "stream_one_shot_us", numberInto([](Cluster& c) -> double& { return last(c).streamOneShotUs; })},
      {Section::Domain, "stream_pieces_us", numberInto([](Cluster& c) -> double& { return last(c).streamPiecesUs; })},
      {Section::Domain, "stream_pieces_gbs", numberInto([](Cluster& c) -> double& { return last(c).streamPiecesGBs; })},
      {Section::Domain, "gpudirect",
       [](Cluster& c, const std::string& v, std::string* why) { return yesNo(v, &last(c).gpuDirect, why); }},
      {Section::Domain, "reduce_gbs", numberInto([](Cluster& c) -> double& { return last(c).reduceGBs; })},
      {Section::Domain, "cores_per_node", wholeInto([](Cluster& c) -> int& { return last(c).coresPerNode; })},
      {Section::Domain, "cache_mib", numberInto([](Cluster& c) -> double& { return last(c).cacheMiB; })},
      {Section::Domain, "beyond_cache", numberInto([](Cluster& c) -> double& { return last(c).beyondCache; })},
      {Section::Domain, "samples_per_s", numberInto([](Cluster& c) -> double& { return last(c).samplesPerSecond; })},
      {Section::Training, "parameters", numberInto([](Cluster& c) -> double& { return c.training.parameters; })},
      {Section::Training, "bytes_per_gradient", numberInto([](Cluster& c) -> double& { return c.training.bytesPerGradient; })},
      {Section::Training, "global_batch", numberInto([](Cluster& c) -> double& { return c.training.globalBatch; })},
      {Section::Training, "overlap", numberInto([](Cluster& c) -> double& { return c.training.overlap; })},
  };
  return table;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The whole cluster's consistency, after every line is read.
bool check(const Cluster& c, const std::string& source, std::string* error) {
  auto bad = [&](int line, const std::string& what) {
    *error = source + ":" + std::to_string(line) + ": " + what;
    return false;
  };
  if (c.domains.empty()) return bad(1, "no [domain NAME] section: a cluster has at least one domain");
  const bool crosses = c.domains.size() > 1;
  for (const DomainSpec& d : c.domains) {
    const std::string in = "domain " + d.name + ": ";
    if (d.nodes < 1) return bad(d.line, in + "nodes must be at least 1");
    if (d.gpusPerNode < 1) return bad(d.line, in + "gpus_per_node must be at least 1");
    if (d.ranks() > 1 && d.libraryBusGBs <= 0)
      return bad(d.line, in + "library_busbw_gbs must be above 0 (the vendor library's bus bandwidth)");
    if (d.libraryLatencyUs < 0) return bad(d.line, in + "library_latency_us must not be negative");
    if (d.libraryStepUs < 0) return bad(d.line, in + "library_step_us must not be negative (0: library_latency_us)");
    if (d.stagingUs < 0) return bad(d.line, in + "staging_us must not be negative");
    if (d.libraryCopyGBs < 0) return bad(d.line, in + "library_copy_gbs must not be negative (0: library_busbw_gbs)");
    if (d.libraryRsGBs < 0) return bad(d.line, in + "library_rs_gbs must not be negative (0: library_busbw_gbs)");
    if (d.reduceGBs <= 0) return bad(d.line, in + "reduce_gbs must be above 0");
    if (d.cacheMiB < 0) return bad(d.line, in + "cache_mib must not be negative (0: no cache in the model)");
    if (d.beyondCache < 1) return bad(d.line, in + "beyond_cache must be at least 1 (a byte beyond the cache costs more)");
    if ((crosses || d.nodes > 1) && d.nicsPerNode < 1)
      return bad(d.line, in + "nics_per_node is 0: its GPUs have no NIC path to the other nodes");
    if (crosses && d.vendor != Vendor::Cpu && d.pcieGBs <= 0)
      return bad(d.line, in + "pcie_gbs must be above 0 (GPU ranks' bytes between domains go through host memory)");
    if (d.streamLowLatencyUs < 0 || d.streamOneShotUs < 0 || d.streamPiecesUs < 0)
      return bad(d.line, in + "stream_ll_us, stream_one_shot_us and stream_pieces_us must not be negative");
    if (d.streamPiecesGBs < 0) return bad(d.line, in + "stream_pieces_gbs must not be negative (0: pcie_gbs)");
    if (c.training.present && d.samplesPerSecond <= 0)
      return bad(d.line, in + "samples_per_s must be above 0 in a cluster with a [training] section");
    for (const DomainSpec& e : c.domains)
      if (&e != &d && e.name == d.name) return bad(e.line, "domain " + d.name + " is named twice");
  }
  const int net = c.network.line, train = c.training.line;
  if ((crosses || c.nodes() > 1) && c.network.nicGbps <= 0)
    return bad(net, "[network] nic_gbps must be above 0 (the nodes talk through their NICs)");
  if (c.network.oneWayGbps < 0) return bad(net, "[network] one_way_gbps must not be negative (0: nic_gbps)");
  if (c.network.latencyUs < 0) return bad(net, "[network] latency_us must not be negative");
  if (c.network.handoffUs < 0) return bad(net, "[network] handoff_us must not be negative");
  if (c.network.gapUs < 0) return bad(net, "[network] gap_us must not be negative");
  if (c.network.furtherUs < 0) return bad(net, "[network] further_message_us must not be negative");
  if (c.network.eagerBytes < 0) return bad(net, "[network] eager_bytes must not be negative");
  if (c.network.oversubscription < 1) return bad(net, "[network] oversubscription must be at least 1");
  if (c.training.present) {
    if (c.training.parameters <= 0) return bad(train, "[training] parameters must be above 0");
    if (c.training.bytesPerGradient <= 0) return bad(train, "[training] bytes_per_gradient must be above 0");
    if (c.training.globalBatch < c.ranks())
      return bad(train, "[training] global_batch must be at least the number of ranks (" + std::to_string(c.ranks()) + ")");
    if (c.training.overlap < 0 || c.training.overlap > 1) return bad(train, "[training] overlap must lie in 0..1");
  }
  return true;
}

}  // namespace

bool parseCluster(const std::string& text, const std::string& source, Cluster* out, std::string* error) {
  Cluster c;
  c.name = source;
  Section section = Section::Top;
  std::istringstream in(text);
  std::string raw;
  for (int line = 1; std::getline(in, raw); ++line) {
    auto bad = [&](const std::string& what) {
      *error = source + ":" + std::to_string(line) + ": " + what;
      return false;
    };
    const std::string s = trim(raw.substr(0, raw.find('#')));
    if (s.empty()) continue;
    if (s.front() == '[') {
      if (s.back() != ']') return bad("a section header must end with ]");
      const std::string head = trim(s.substr(1, s.size() - 2));
      if (head == "network") {
        section = Section::Network;
        c.network.line = line;
      } else if (head == "training") {
        section = Section::Training;
        c.training.present = true;
        c.training.line = line;
      } else if (head.rfind("domain", 0) == 0 && head.size() > 6 && (head[6] == ' ' || head[6] == '\t')) {
        section = Section::Domain;
        DomainSpec d;
        d.name = trim(head.substr(6));
        d.line = line;
        c.domains.push_back(d);
      } else {
        return bad("unknown section [" + head + "] (network, domain NAME, training)");
      }
      continue;
    }
    const size_t eq = s.find('=');
    if (eq == std::string::npos) return bad("expected key = value");
    const std::string key = trim(s.substr(0, eq)), value = trim(s.substr(eq + 1));
    const Field* field = nullptr;
    for (const Field& f : fields())
      if (f.section == section && key == f.key) field = &f;
    if (!field) return bad("unknown field '" + key + "' here");
    std::string why;
    if (!field->set(c, value, &why)) return bad(key + ": " + why);
  }
  if (!check(c, source, error)) return false;
  *out = std::move(c);
  return true;
}

bool loadCluster(const std::string& path, Cluster* out, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = path + ": cannot be read";
    return false;
  }
  std::stringstream text;
  text << f.rdbuf();
  return parseCluster(text.str(), path, out, error);
}

}  // namespace hetccl::model

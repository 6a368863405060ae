// What the network between nodes (or, CPU ranks on one host, the
// transport between them) gives the cost model's steps: a rank's and a
// node's bandwidth across the fabric, a hop's latency, the gap between
// messages back to back (docs/simulator.md, [network]).
#pragma once

#include "model/cluster.h"

namespace hetccl::model {

// What the fabric above the leaves divides bandwidth by, once the nodes
// span several leaves.
double aboveTheLeaves(const Cluster& c);
// What one rank of a domain moves to or from other nodes per second
// (bytes): its share of the node's NICs (`leader`: a rank alone on its
// node's NIC), the fabric above the leaves.
double crossBandwidth(const Cluster& c, const DomainSpec& d, bool leader);
// The narrowest of the domains' cross bandwidths (a ring, a chain, the leaders).
double slowestLink(const Cluster& c, bool leader);
// What a node's NICs carry per second (bytes), each way (above the
// leaves: shared by the oversubscription).
double nodeNics(const Cluster& c, const DomainSpec& d);
// One hop between nodes: the network's latency (seconds).
double crossAlpha(const Cluster& c);
// One hop's latency for a message of `bytes`. On one host the CPU ranks'
// messages between domains go through the same shared-memory transport
// as their domain's rounds, whose smallest messages take less than the
// latency fitted from a few KiB up: below kLatencyRampBytes it ramps as
// a round's does (Library::alphaOf), from library_step_us /
// library_latency_us of it at 0 bytes. Elsewhere: crossAlpha. (At
// latency_us throughout, three one-rank domains' all-reduce of 1 KiB came
// out 39% long at the median of 17 16-core hosts, 17% with the ramp; of
// several domains' 1 KiB rows 78% were within 20%, 86% with it.)
double crossAlphaOf(const Cluster& c, double bytes);
// Messages below the eager size, back to back: how far apart they follow
// each other (seconds; gap_us, where the file gives none a latency apart).
double gapOf(const Cluster& c);
// Each further message a rank posts at once with its first, to other
// peers (a root's to several leaders, a round's to several domains): its
// sender's time (seconds; further_message_us, where the file gives none
// the gap).
double furtherOf(const Cluster& c);

}  // namespace hetccl::model

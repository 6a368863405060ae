// CPU ranks on a host as the cost model (cost_model.h) sees them: the
// cores they share, the wake-ups they wait for beyond them, and the cache
// their buffers fit in. GPU domains are untouched by all of it.
#pragma once

#include "model/cluster.h"
#include "model/cost_model.h"

namespace hetccl::model {

// The bytes of one rank's buffers in a call (nccl-tests' out-of-place
// buffers: its input and its output).
double buffersPerRank(Collective coll, double s, double ranks);

// The bytes of those a call touches, a rank's share of the host's: a
// rooted call reads or writes one buffer of each rank and the root's
// other one (a broadcast: the root's input, every output; a reduce:
// every input, the root's output).
double touchedPerRank(Collective coll, double s, double ranks);

// CPU ranks beyond their node's cores take turns: every step of theirs
// slows by the ratio (one host: all the cluster's ranks share it).
double cpuSlowdown(const Cluster& c);

// Then a thread that waits (a rank for a message, a rank's progress
// thread for its piece, the rank for the thread) is not running and must
// be woken: every round of messages and each hand-off between a domain's
// step and the progress thread costs `handoff_us`; within the cores the
// threads spin and wake-ups cost nothing.
bool ranksBeyondCores(const Cluster& c);

// CPU ranks beyond their cores slow every step by ranks / cores
// (cost_model.cc's estimate()); a step in which only `active` of one
// host's ranks work while the others wait asleep shares the cores among
// fewer: its share of that slowdown.
double activeShare(const Cluster& c, double active);

// One host's CPU ranks beyond its cores: the share of `rankSeconds` of
// busy time the cores give each, in the units of a plan's steps (slowed
// all alike by ranks / cores afterwards); 0 elsewhere.
double coresShare(const Cluster& c, double rankSeconds);

// The share of one host's CPU buffers of a call of `s` bytes beyond
// their cache (cache_mib): 0 where they fit, towards 1 far beyond.
double beyondCacheShare(const Cluster& c, const DomainSpec& d, Collective coll, double s);

// One host's CPU ranks in a pipelined plan (all-reduce, reduce-scatter,
// all-gather, reduce): each rank's domain step and its progress thread's
// step between domains overlap only while the cores leave each rank a
// second one and its buffers fit the cache. The share of the plan's steps
// that pass one after the other instead, each domain's ranks through
// their own steps (pipelinedIn): min(1, 2 ranks / cores) beyond the cache
// (the 16-core hosts: eight ranks' all-reduce and reduce-scatter from 1
// MiB took their steps' sum, four domains of two's reduce of 2-16 MiB
// 1.5-2x their busiest step's, their all-gather of 1-16 MiB 1.1-1.9x on
// every host; four ranks' calls the busiest step's); 0 elsewhere. (The
// broadcast's pieces are left to pass at their busiest step's or at the
// cores' share of their work: in turn, no better on the one host measured
// through the slots.)
double stepsInTurn(const Cluster& c, Collective coll, double s);

// The cluster as one call of `s` bytes meets it. CPU ranks move and
// reduce bytes at the fitted bandwidths while a host's buffers fit its
// cache (cache_mib); beyond it the share that does not fit costs
// beyond_cache times as much per byte: every bandwidth of those domains
// (and of one host's links between them) scaled so. Beyond their cores,
// every round of messages waits for a wake-up too (`wakeEachRound`; not
// where calls back to back overlap: the leaders' broadcast and reduce,
// whose wake-ups the cost model counts as their work).
Cluster asRun(const Cluster& c, Collective coll, double s, bool wakeEachRound);

}  // namespace hetccl::model

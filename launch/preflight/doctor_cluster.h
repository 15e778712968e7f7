// `brt-dist doctor` across hosts: the checks that catch what breaks real
// multi-host runs before a long job starts, run collectively by every rank under the real
// launcher:
//  - the same brt-dist on every host (version and a checksum of the executable) and the same
//    MPI library;
//  - the checkpoint directory is one writable directory seen by every host: world rank 0
//    leaves a token in it, every rank must read that token and leave its own file, and every
//    rank must see every other rank's file. A node-local path (/tmp/ckpt, a local scratch
//    disk) as checkpoint.dir is the classic way to lose a run: each host keeps its part of
//    every checkpoint and a restart on other hosts finds none;
//  - the data directory holds the same files (names and sizes) on every host (a node-local
//    copy is fine, a missing or partial one is not);
//  - bandwidth and latency of every pair of hosts (ping-pong between the first rank of each
//    host); a pair much slower than the fastest, or below --min-link-gbps, is named.
// Each check returns the problems it found ("" or messages naming hosts and ranks) and prints
// on world rank 0. Every wait runs under the session's watchdog, so a host that stops
// answering ends the doctor with the usual timeout report instead of a hang.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "parallel/health/job_monitor.h"

namespace brt::launch {

struct HostGroup {
  std::string host;
  std::vector<int> ranks;  // world ranks, ascending
};
// Every rank's host, in world-rank order (collective over `world`).
std::vector<std::string> gather_hosts(MPI_Comm world);
// Hosts in order of their first rank.
std::vector<HostGroup> group_by_host(const std::vector<std::string>& hosts);

// Problems (possibly none) with the brt-dist binary (`version` and a checksum of the executable)
// and MPI library across hosts.
std::vector<std::string> check_same_software(MPI_Comm world, const std::vector<HostGroup>& hosts,
                                             const std::string& version);
// Problems with `dir` (`what`: "checkpoint dir") as one writable directory of every host.
std::vector<std::string> check_shared_directory(MPI_Comm world, const std::vector<HostGroup>& hosts,
                                                const std::string& dir, const std::string& what,
                                                parallel::JobMonitor& monitor);
// Problems with `dir` holding the same files on every host.
std::vector<std::string> check_same_contents(MPI_Comm world, const std::vector<HostGroup>& hosts,
                                             const std::string& dir, const std::string& what);

struct LinkMeasure {
  std::string a, b;         // hosts
  double latency_us = 0;    // half a round trip of 8 bytes, median
  double gbps = 0;          // one-way payload, GB/s (1e9 bytes/s)
};
// Every pair of hosts, one pair at a time (collective over `world`; world rank 0 gets them all).
std::vector<LinkMeasure> measure_host_links(MPI_Comm world, const std::vector<HostGroup>& hosts,
                                            parallel::JobMonitor& monitor);
// The pairs slower than the fastest pair / `ratio`, or than `min_gbps` (0: no floor): one
// problem naming them (and the host they all share, when they do); "" when none.
std::string slow_links(const std::vector<LinkMeasure>& links, double ratio, double min_gbps);

// The cluster file for `brt-dist plan --cluster`: `existing` (a file's text, or "" for a new
// one) with inter_node_gbps set to the slowest measured pair and nodes to the host count; a new
// file also gets gpus_per_node (ranks per host) and the given per-rank peak and memory.
std::string cluster_file_with_links(const std::string& existing, const std::vector<LinkMeasure>& links,
                                    int nodes, int ranks_per_node, double peak_gflops, double memory_gb);

}  // namespace brt::launch

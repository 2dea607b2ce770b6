#pragma once
// Slow node / slow link localisation: which figures fall below the rest
// (robust statistics: median and MAD, plus a minimum relative drop so that the
// noise of a tight cluster is never blamed), which nodes the node-pair
// bandwidths point at, a re-test plan against known-good nodes, and the
// verdicts. Pure functions; the checklist runner measures and calls them.
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ccscope/diag/check.h"

namespace ccscope::diag {

struct OutlierOptions {
  // Iglewicz-Hoaglin: modified z = 0.6745 (x - median) / MAD; below
  // -modified_z is an outlier (3.5 is their recommendation).
  double modified_z = 3.5;
  // And at least this far below the median (0.25: 25% below). Keeps a tight
  // cluster's noise (MAD near 0, any wobble a huge z) from being blamed, and
  // is the only rule when MAD is 0 or with 2 figures.
  double min_relative_drop = 0.25;
};

// Indices (ascending) of the figures, higher being better, that fall below
// the rest: modified z < -options.modified_z and at least
// options.min_relative_drop below the median; with MAD = 0, the relative rule
// alone. Non-finite figures take no part and are never returned; no
// positive median means there is no healthy majority to compare against: none.
// Two figures: MAD cannot tell (the z of either is +-0.6745), so the
// relative rule decides, taken against the higher one; when the lower one is
// that far below, BOTH indices come back: two figures have no majority, and
// either end may be the odd one (a slow one, or a faster part). Callers say
// so (judge_homogeneous_figures WARNs both). Below 3 values a verdict is weak.
std::vector<size_t> low_outliers(std::span<const double> figures,
                                 const OutlierOptions& options = {});

// One measured node pair: a and b exchanged at once, GBps each way.
struct PairFigure {
  std::string a, b;
  double GBps = 0;
};

struct LocalizeOptions {
  OutlierOptions outliers;
  // With topo's expected per-pair figure, a pair below this fraction of it is
  // slow whatever the others do (healthy transfers reach 0.8-0.95 of a
  // link's rate; below 0.6 is not protocol overhead).
  double expected_fraction = 0.6;
};

struct Localization {
  std::vector<PairFigure> pairs;       // the input, for the evidence
  std::vector<PairFigure> slow_pairs;  // below slow_below_GBps
  // Suspects: every measured pair of theirs is slow. Known good: at least one
  // pair is not slow (a pair is slow if either end is, so a fine pair clears
  // both ends). Sorted by name.
  std::vector<std::string> suspects, known_good;
  // Slow pairs whose two ends are both known good: the link between them.
  std::vector<PairFigure> slow_links;
  // (suspect, known-good partner) to measure again; partners are distinct
  // while there are enough known-good nodes, so the re-tests can run at once
  // as disjoint pairs.
  std::vector<std::pair<std::string, std::string>> retests;
  // The cluster's healthy pair figure: the median over nodes of each node's
  // best pair. Not the median of all pairs: one slow node of 3 is in 2 of
  // the 3 pairs. Holds while fewer than half the nodes are slow.
  double median_GBps = 0;
  double slow_below_GBps = 0;  // the threshold the pairs were judged by
  double expected_GBps = 0;    // as given (0: unknown)
  // Slow pairs, and no node known good: the cluster (fabric, switch, a
  // common setting), not a node; or 2 nodes, where one pair cannot say.
  bool cluster_wide = false;
};

// Pairs with a figure that is not finite, or a node paired with itself, are
// left out. A pair measured more than once counts once per figure.
// expected_GBps: topo's expected figure for one pair, 0 when unknown.
Localization localize(const std::vector<PairFigure>& pairs, double expected_GBps,
                      const LocalizeOptions& options = {});

// The verdicts, given the re-test figures (any order of a and b; a pair
// measured again more than once: its median). Checks:
//  cluster.slow_node   host = the suspect. Re-test also slow: FAIL below half
//                      the cluster median (or half of expected_GBps), else WARN.
//                      Re-test fine: PASS, cleared. Not re-tested: WARN.
//  cluster.slow_link   host, peer = the two ends, both fine with others: FAIL
//                      below half, else WARN; a re-test figure of that same
//                      pair that is fine clears it (PASS).
//  cluster.pairwise    cluster-wide slowness (FAIL/WARN, host ""); PASS
//                      summary when nothing is slow; SKIP with no pairs.
// measured: the re-test figure, else the median of the node's (the link's)
// figures; expected: the cluster median; unit "GB/s". Re-test figures of a
// slow link's own pair are optional (the plan holds suspects only).
// expected_GBps: topo's per-pair figure for the FAIL line and the messages;
// 0 keeps localize's. Which pairs are slow, localize already decided.
std::vector<Check> judge_localization(const Localization& localization,
                                      const std::vector<PairFigure>& retest_figures,
                                      double expected_GBps);

// One subject of a per-rank or per-node figure where higher is better
// (GEMM GFLOP/s, memory bandwidth, intra-node busbw).
struct Subject {
  std::string host;
  int rank = -1;
  double value = 0;
};

// One Check per subject, in order: FAIL for a low outlier below half the
// median, WARN for one above half, PASS otherwise (measured = value,
// expected = the median). Two subjects that disagree: both WARN (no majority
// to say which one is off). One subject, or a subject whose value is not
// finite: SKIP.
std::vector<Check> judge_homogeneous_figures(Stage stage, const std::string& name,
                                             const std::string& unit,
                                             const std::vector<Subject>& subjects,
                                             const std::string& remedy,
                                             const OutlierOptions& options = {});

// Split-half localisation: instead of every node pair (N(N-1)/2 runs), the
// candidate nodes are split in two halves measured at once (each half's
// all-reduce is bounded by its slowest node), the slower half is kept, and so
// on, log2(N) rounds, until at most `pair_group` candidates are left; only
// those then go through the node pairs. A pure driver over `measure_halves`
// (the two halves' figures, GB/s, measured at the same time).
struct SplitHalfResult {
  std::vector<std::string> candidates;  // where the slow node is (pairs run here); empty: none
  size_t rounds = 0;                    // halves measured (each round: both halves at once)
  bool cluster_wide = false;            // the first round's halves agreed: no one half is slow
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> halves;  // per round
  std::vector<std::pair<double, double>> figures;  // per round: the halves' GB/s, in that order
};
// The nodes in two halves, in order: the first gets the extra node of an odd count.
std::pair<std::vector<std::string>, std::vector<std::string>> split_halves(
    const std::vector<std::string>& nodes);
SplitHalfResult localize_split_half(
    const std::vector<std::string>& nodes,
    const std::function<std::pair<double, double>(const std::vector<std::string>&,
                                                  const std::vector<std::string>&)>& measure_halves,
    size_t pair_group = 3, const OutlierOptions& options = {});

// How stage 3 localises a slow node: every node pair, or split-half first and
// the pairs inside the slow group. kAuto: split-half from kSplitHalfFromNodes
// nodes (below, the pairs are as few as a round of halves plus 3 pairs).
enum class LocalizeMethod { kAuto, kPairs, kSplitHalf };
inline constexpr size_t kSplitHalfFromNodes = 5;
bool use_split_half(LocalizeMethod method, size_t nodes);

// The nodes whose pairs stage 3 measures after split-half: the candidates, and
// when they are fewer than 3 (a pair cannot say which end is slow) nodes that
// were in a faster half, in `nodes`' order, up to 3. Empty: no half was slower.
std::vector<std::string> pair_nodes_after_split_half(const std::vector<std::string>& nodes,
                                                     const SplitHalfResult& result);

// cluster.split_half: what the halves measured and which group the pairs then
// went through. Always PASS (evidence, not a verdict: the node pairs and their
// re-tests name the node, and a half can read 25% low from noise alone); SKIP
// when no round ran. unit "GB/s": measured the slower half of the first round,
// expected the faster one.
Check judge_split_half(const SplitHalfResult& result, const std::vector<std::string>& pair_nodes);

}  // namespace ccscope::diag

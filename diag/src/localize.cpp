#include "ccscope/diag/localize.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "ccscope/common/statistics.h"

namespace ccscope::diag {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// FAIL below this fraction of the reference, WARN between it and the outlier line.
constexpr double kFailFraction = 0.5;

const char* kSlowNodeRemedy =
    "check the node's NIC, cable and switch port: link rate and width (ibstat, ethtool), error "
    "counters (perfquery, ethtool -S), the NIC's PCIe link (lspci -vv) and NUMA placement; then "
    "re-run the pairwise test";
const char* kSlowLinkRemedy =
    "check the cable and the two switch ports between these nodes (ibstat, perfquery, the "
    "switch's port counters) and the route (ibtracert); then re-run this pair";
const char* kClusterWideRemedy =
    "a cluster-wide problem, not one node: check the fabric and its switches, the NICs' link rate "
    "and MTU, NCCL_IB_HCA / NCCL_SOCKET_IFNAME, GPUDirect RDMA; with 2 nodes, re-test each "
    "against a third node";

double clamped_drop(const OutlierOptions& options) {
  return std::isfinite(options.min_relative_drop) ? std::clamp(options.min_relative_drop, 0.0, 1.0)
                                                  : 0.25;
}

double clamped_z(const OutlierOptions& options) {
  return std::isfinite(options.modified_z) && options.modified_z > 0 ? options.modified_z : 3.5;
}

// A figure is low when below both the relative line (1 - drop) x center and
// the modified-z line center - z MAD / 0.6745 (the latter absent when MAD is 0).
double low_line(double center, double relative_center, double mad, const OutlierOptions& options) {
  const double relative = (1 - clamped_drop(options)) * relative_center;
  if (!(mad > 0)) return relative;
  return std::min(relative, center - clamped_z(options) * mad / kModifiedZScale);
}

// Short figures for messages: 0.115, 23.4, 312.
std::string figure(double value) {
  if (!std::isfinite(value)) return "n/a";
  if (std::abs(value) >= 100) return fmt::format("{:.0f}", value);
  return fmt::format("{:.3g}", value);
}

double median_of(const std::vector<double>& values) {
  return values.empty() ? kNaN : median(values);
}

bool names_pair(const PairFigure& pair, const std::string& x, const std::string& y) {
  return (pair.a == x && pair.b == y) || (pair.a == y && pair.b == x);
}

// The median of the re-test figures of x and y, NaN when there is none.
double retest_figure(const std::vector<PairFigure>& retests, const std::string& x,
                     const std::string& y) {
  std::vector<double> values;
  for (const PairFigure& pair : retests)
    if (names_pair(pair, x, y) && std::isfinite(pair.GBps)) values.push_back(pair.GBps);
  return median_of(values);
}

std::string other_end(const PairFigure& pair, const std::string& node) {
  return pair.a == node ? pair.b : pair.a;
}

bool below_fail_line(double value, const Localization& localization) {
  if (value < kFailFraction * localization.median_GBps) return true;
  return localization.expected_GBps > 0 && value < kFailFraction * localization.expected_GBps;
}

std::string against(const Localization& localization) {
  std::string text = fmt::format("cluster median {} GB/s", figure(localization.median_GBps));
  if (localization.expected_GBps > 0)
    text += fmt::format(", expected {} GB/s", figure(localization.expected_GBps));
  return text;
}

}  // namespace

std::vector<size_t> low_outliers(std::span<const double> figures, const OutlierOptions& options) {
  std::vector<size_t> indices;
  std::vector<double> values;
  for (size_t i = 0; i < figures.size(); ++i) {
    if (!std::isfinite(figures[i])) continue;
    indices.push_back(i);
    values.push_back(figures[i]);
  }
  if (values.size() < 2) return {};
  if (values.size() == 2) {
    const double high = std::max(values[0], values[1]);
    const double low = std::min(values[0], values[1]);
    if (high > 0 && low < (1 - clamped_drop(options)) * high) return indices;
    return {};
  }
  const double center = median(values);
  if (!(center > 0)) return {};
  const double line = low_line(center, center, median_absolute_deviation(values), options);
  std::vector<size_t> low;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] < line) low.push_back(indices[i]);
  return low;
}

Localization localize(const std::vector<PairFigure>& pairs, double expected_GBps,
                      const LocalizeOptions& options) {
  Localization localization;
  localization.expected_GBps =
      std::isfinite(expected_GBps) && expected_GBps > 0 ? expected_GBps : 0;
  for (const PairFigure& pair : pairs)
    if (std::isfinite(pair.GBps) && !pair.a.empty() && !pair.b.empty() && pair.a != pair.b)
      localization.pairs.push_back(pair);
  if (localization.pairs.empty()) return localization;

  std::map<std::string, double> best_of_node;
  for (const PairFigure& pair : localization.pairs)
    for (const std::string* node : {&pair.a, &pair.b}) {
      auto [it, inserted] = best_of_node.emplace(*node, pair.GBps);
      if (!inserted) it->second = std::max(it->second, pair.GBps);
    }
  std::vector<double> bests;
  for (const auto& [node, best] : best_of_node) bests.push_back(best);
  localization.median_GBps = median(bests);

  // The noise of healthy pairs: the spread of the pairs between nodes whose
  // best pair is not already below the relative line. A slow node's pairs
  // would widen it and hide themselves (they are 2 of the 3 pairs of 3 nodes);
  // cutting pairs at the line instead would drop the low half of honest noise.
  const double relative_line =
      (1 - clamped_drop(options.outliers)) * std::max(localization.median_GBps, 0.0);
  std::vector<double> healthy;
  for (const PairFigure& pair : localization.pairs)
    if (best_of_node[pair.a] >= relative_line && best_of_node[pair.b] >= relative_line)
      healthy.push_back(pair.GBps);
  double line = 0;
  if (localization.median_GBps > 0)
    line = healthy.empty() ? relative_line
                           : low_line(median(healthy), localization.median_GBps,
                                      median_absolute_deviation(healthy), options.outliers);
  if (localization.expected_GBps > 0 && std::isfinite(options.expected_fraction))
    line = std::max(line, options.expected_fraction * localization.expected_GBps);
  localization.slow_below_GBps = line;

  std::set<std::string> has_fine_pair;
  for (const PairFigure& pair : localization.pairs) {
    if (pair.GBps < line) {
      localization.slow_pairs.push_back(pair);
    } else {
      has_fine_pair.insert(pair.a);
      has_fine_pair.insert(pair.b);
    }
  }
  for (const auto& [node, best] : best_of_node)
    (has_fine_pair.count(node) ? localization.known_good : localization.suspects).push_back(node);
  localization.cluster_wide = !localization.slow_pairs.empty() && localization.known_good.empty();

  // A slow pair between two known-good nodes is their link, unless the same
  // pair was also measured fine (then it was noise), listed once.
  for (const PairFigure& pair : localization.slow_pairs) {
    if (!has_fine_pair.count(pair.a) || !has_fine_pair.count(pair.b)) continue;
    const auto same = [&](const PairFigure& other) { return names_pair(other, pair.a, pair.b); };
    const bool also_fine =
        std::any_of(localization.pairs.begin(), localization.pairs.end(),
                    [&](const PairFigure& other) { return same(other) && other.GBps >= line; });
    const bool listed =
        std::any_of(localization.slow_links.begin(), localization.slow_links.end(), same);
    if (!also_fine && !listed) localization.slow_links.push_back(pair);
  }

  // Partners: the best known-good nodes first, one per suspect while they last.
  std::vector<std::string> partners = localization.known_good;
  std::stable_sort(partners.begin(), partners.end(),
                   [&](const auto& x, const auto& y) { return best_of_node[x] > best_of_node[y]; });
  if (!partners.empty())
    for (size_t i = 0; i < localization.suspects.size(); ++i)
      localization.retests.emplace_back(localization.suspects[i], partners[i % partners.size()]);
  return localization;
}

std::vector<Check> judge_localization(const Localization& localization,
                                      const std::vector<PairFigure>& retest_figures,
                                      double expected_GBps) {
  // The expected figure given here wins over the one localize had (the
  // runner may only learn it later); 0 keeps localize's.
  Localization judged = localization;
  if (std::isfinite(expected_GBps) && expected_GBps > 0) judged.expected_GBps = expected_GBps;

  std::vector<Check> checks;
  const auto make = [&](const char* name, Status status) {
    Check check;
    check.stage = Stage::kCluster;
    check.name = name;
    check.status = status;
    check.unit = "GB/s";
    check.expected = judged.median_GBps;
    return check;
  };
  if (judged.pairs.empty()) {
    Check check = make("cluster.pairwise", Status::kSkip);
    check.expected = kNaN;
    check.message = "no node-pair figures to judge (one node, or none measured)";
    return {check};
  }
  std::set<std::string> nodes;
  std::vector<double> all;
  for (const PairFigure& pair : judged.pairs) {
    nodes.insert(pair.a);
    nodes.insert(pair.b);
    all.push_back(pair.GBps);
  }

  if (judged.cluster_wide) {
    const double pair_median = median(all);
    Check check = make("cluster.pairwise",
                       below_fail_line(pair_median, judged) ? Status::kFail : Status::kWarn);
    check.measured = pair_median;
    check.expected = judged.expected_GBps > 0 ? judged.expected_GBps : judged.median_GBps;
    if (nodes.size() == 2) {
      const PairFigure& pair = judged.pairs.front();
      check.message = fmt::format(
          "the only pair, {}-{}, reached {} GB/s, slow below {} GB/s ({}): with 2 nodes one "
          "pair cannot say which end is slow",
          pair.a, pair.b, figure(pair_median), figure(judged.slow_below_GBps), against(judged));
    } else {
      check.message = fmt::format(
          "all {} pairs of {} nodes are slow (median {} GB/s, slow below {} GB/s, {}): no node "
          "is known good, so it is the cluster, not a node",
          judged.pairs.size(), nodes.size(), figure(pair_median), figure(judged.slow_below_GBps),
          against(judged));
    }
    check.remedy = kClusterWideRemedy;
    return {check};
  }

  for (const std::string& suspect : judged.suspects) {
    std::vector<double> own;
    std::string evidence;
    for (const PairFigure& pair : judged.pairs) {
      if (pair.a != suspect && pair.b != suspect) continue;
      own.push_back(pair.GBps);
      evidence += fmt::format("{}{} {}", evidence.empty() ? "" : ", ", other_end(pair, suspect),
                              figure(pair.GBps));
    }
    // The planned partner, else any known-good node the runner re-tested it with.
    std::string partner;
    for (const auto& [node, known_good] : judged.retests)
      if (node == suspect) partner = known_good;
    double retest = partner.empty() ? kNaN : retest_figure(retest_figures, suspect, partner);
    for (const PairFigure& pair : retest_figures) {
      if (!std::isnan(retest) || (pair.a != suspect && pair.b != suspect)) continue;
      const std::string other = other_end(pair, suspect);
      if (std::binary_search(judged.known_good.begin(), judged.known_good.end(), other)) {
        partner = other;
        retest = retest_figure(retest_figures, suspect, partner);
      }
    }
    Check check = make("cluster.slow_node", Status::kWarn);
    check.host = suspect;
    const std::string seen =
        fmt::format("every pair of {} is slow (with {} GB/s; slow below {} GB/s, {})", suspect,
                    evidence, figure(judged.slow_below_GBps), against(judged));
    if (std::isnan(retest)) {
      check.measured = median_of(own);
      check.message = seen + (partner.empty() ? "; no known-good partner to re-test against"
                                              : "; not re-tested against " + partner);
      check.remedy = kSlowNodeRemedy;
    } else if (retest < judged.slow_below_GBps) {
      check.measured = retest;
      check.status = below_fail_line(retest, judged) ? Status::kFail : Status::kWarn;
      check.message = seen + fmt::format(", and the re-test against known-good {} too: {} GB/s",
                                         partner, figure(retest));
      check.remedy = kSlowNodeRemedy;
    } else {
      check.measured = retest;
      check.status = Status::kPass;
      check.message =
          seen + fmt::format(
                     "; cleared: the re-test against known-good {} reached {} GB/s (the "
                     "first figures were noise, or the other ends)",
                     partner, figure(retest));
    }
    checks.push_back(check);
  }

  for (const PairFigure& link : judged.slow_links) {
    std::vector<double> figures;
    for (const PairFigure& pair : judged.pairs)
      if (names_pair(pair, link.a, link.b)) figures.push_back(pair.GBps);
    const auto best_with_others = [&](const std::string& node) {
      double best = kNaN;
      for (const PairFigure& pair : judged.pairs)
        if ((pair.a == node || pair.b == node) && !names_pair(pair, link.a, link.b) &&
            !(best >= pair.GBps))
          best = pair.GBps;
      return best;
    };
    const double first = median_of(figures);
    const double retest = retest_figure(retest_figures, link.a, link.b);
    Check check = make("cluster.slow_link", Status::kWarn);
    check.host = link.a;
    check.peer = link.b;
    check.measured = std::isnan(retest) ? first : retest;
    const std::string seen = fmt::format(
        "the link {}-{} reached {} GB/s (slow below {} GB/s, {}), while {} reaches {} and {} "
        "reaches {} GB/s with others",
        link.a, link.b, figure(first), figure(judged.slow_below_GBps), against(judged), link.a,
        figure(best_with_others(link.a)), link.b, figure(best_with_others(link.b)));
    if (!std::isnan(retest) && retest >= judged.slow_below_GBps) {
      check.status = Status::kPass;
      check.message = seen + fmt::format("; cleared: its re-test reached {} GB/s", figure(retest));
    } else {
      check.status = below_fail_line(check.measured, judged) ? Status::kFail : Status::kWarn;
      check.message =
          seen + (std::isnan(retest) ? "" : fmt::format("; re-test {} GB/s", figure(retest)));
      check.remedy = kSlowLinkRemedy;
    }
    checks.push_back(check);
  }

  if (worst_status(checks) == Status::kPass) {
    const auto slowest =
        std::min_element(judged.pairs.begin(), judged.pairs.end(),
                         [](const PairFigure& x, const PairFigure& y) { return x.GBps < y.GBps; });
    Check check = make("cluster.pairwise", Status::kPass);
    check.measured = judged.median_GBps;
    check.message = fmt::format(
        "{} pairs of {} nodes, no slow node or link: {}, slowest pair {}-{} {} GB/s (slow below "
        "{} GB/s)",
        judged.pairs.size(), nodes.size(), against(judged), slowest->a, slowest->b,
        figure(slowest->GBps), figure(judged.slow_below_GBps));
    checks.push_back(check);
  }
  return checks;
}

std::vector<Check> judge_homogeneous_figures(Stage stage, const std::string& name,
                                             const std::string& unit,
                                             const std::vector<Subject>& subjects,
                                             const std::string& remedy,
                                             const OutlierOptions& options) {
  std::vector<double> values;
  std::vector<double> finite;
  for (const Subject& subject : subjects) {
    values.push_back(subject.value);
    if (std::isfinite(subject.value)) finite.push_back(subject.value);
  }
  const std::vector<size_t> low = low_outliers(values, options);
  const double center = median_of(finite);
  std::vector<Check> checks;
  for (size_t i = 0; i < subjects.size(); ++i) {
    const Subject& subject = subjects[i];
    Check check;
    check.stage = stage;
    check.name = name;
    check.host = subject.host;
    check.rank = subject.rank;
    check.unit = unit;
    check.measured = subject.value;
    check.expected = center;
    const std::string with_unit = unit.empty() ? "" : " " + unit;
    const bool is_low = std::find(low.begin(), low.end(), i) != low.end();
    if (!std::isfinite(subject.value)) {
      check.status = Status::kSkip;
      check.expected = kNaN;
      check.message = "not measured";
    } else if (finite.size() < 2 || !(center > 0)) {
      check.status = Status::kSkip;
      check.expected = kNaN;
      check.message = finite.size() < 2 ? fmt::format("{}{}; no other figure to compare with",
                                                      figure(subject.value), with_unit)
                                        : fmt::format("{}{}; no positive figures to compare with",
                                                      figure(subject.value), with_unit);
    } else if (is_low && finite.size() == 2 &&
               std::min(finite[0], finite[1]) < kFailFraction * std::max(finite[0], finite[1])) {
      // Two figures: no majority, and timing noise on shared machines easily
      // reaches 25%; only a factor of two is worth a WARN on both.
      const double low_value = std::min(finite[0], finite[1]);
      const double high_value = std::max(finite[0], finite[1]);
      check.status = Status::kWarn;
      check.message = fmt::format(
          "{}{}: the two figures ({} and {}{}) differ by {:.0f}%; with two there is no majority "
          "to say which one is off",
          figure(subject.value), with_unit, figure(low_value), figure(high_value), with_unit,
          100 * (1 - low_value / high_value));
      check.remedy = remedy + "; compare each with its expected figure, or with a third";
    } else if (is_low && finite.size() > 2) {
      check.status = subject.value < kFailFraction * center ? Status::kFail : Status::kWarn;
      check.message =
          fmt::format("{}{}, {:.0f}% below the median {}{} of {}", figure(subject.value), with_unit,
                      100 * (1 - subject.value / center), figure(center), with_unit, finite.size());
      check.remedy = remedy;
    } else {
      check.status = Status::kPass;
      check.message = fmt::format("{}{}; median {}{} of {}", figure(subject.value), with_unit,
                                  figure(center), with_unit, finite.size());
    }
    checks.push_back(check);
  }
  return checks;
}

std::pair<std::vector<std::string>, std::vector<std::string>> split_halves(
    const std::vector<std::string>& nodes) {
  const size_t first = (nodes.size() + 1) / 2;
  return {std::vector<std::string>(nodes.begin(), nodes.begin() + static_cast<long>(first)),
          std::vector<std::string>(nodes.begin() + static_cast<long>(first), nodes.end())};
}

SplitHalfResult localize_split_half(
    const std::vector<std::string>& nodes,
    const std::function<std::pair<double, double>(const std::vector<std::string>&,
                                                  const std::vector<std::string>&)>& measure_halves,
    size_t pair_group, const OutlierOptions& options) {
  SplitHalfResult result;
  std::vector<std::string> candidates = nodes;
  // A half needs 2 nodes for a figure of its own; below that, pairs decide.
  while (candidates.size() > std::max<size_t>(pair_group, 3)) {
    auto halves = split_halves(candidates);
    const auto [a, b] = measure_halves(halves.first, halves.second);
    ++result.rounds;
    result.halves.push_back(halves);
    result.figures.push_back({a, b});
    const double high = std::max(a, b), low = std::min(a, b);
    // Not a finite, clearly lower half: no single half holds the slow part.
    if (!std::isfinite(a) || !std::isfinite(b) || high <= 0 ||
        low > high * (1 - options.min_relative_drop)) {
      if (result.rounds == 1) {
        result.cluster_wide = low <= high * (1 - options.min_relative_drop);
        return result;  // nothing slow (or everything): no candidates
      }
      break;  // both halves of the slow group alike: the slow part spans them, pairs decide
    }
    candidates = a < b ? halves.first : halves.second;
  }
  result.candidates = candidates;
  return result;
}

bool use_split_half(LocalizeMethod method, size_t nodes) {
  return method == LocalizeMethod::kSplitHalf ||
         (method == LocalizeMethod::kAuto && nodes >= kSplitHalfFromNodes);
}

std::vector<std::string> pair_nodes_after_split_half(const std::vector<std::string>& nodes,
                                                     const SplitHalfResult& result) {
  std::vector<std::string> out = result.candidates;
  if (out.empty()) return out;
  for (const std::string& node : nodes) {
    if (out.size() >= 3) break;
    if (std::find(out.begin(), out.end(), node) == out.end()) out.push_back(node);
  }
  return out;
}

Check judge_split_half(const SplitHalfResult& result, const std::vector<std::string>& pair_nodes) {
  Check check;
  check.stage = Stage::kCluster;
  check.name = "cluster.split_half";
  if (result.rounds == 0) {
    check.status = Status::kSkip;
    check.message = fmt::format("{} nodes: few enough for every pair", result.candidates.size());
    return check;
  }
  check.status = Status::kPass;
  auto names = [](const std::vector<std::string>& group) {
    return group.size() <= 4
               ? fmt::format("{}", fmt::join(group, ","))
               : fmt::format("{}..{} ({})", group.front(), group.back(), group.size());
  };
  std::vector<std::string> rounds;
  for (size_t i = 0; i < result.rounds; ++i)
    rounds.push_back(fmt::format("{} {} vs {} {} GB/s", names(result.halves[i].first),
                                 figure(result.figures[i].first), names(result.halves[i].second),
                                 figure(result.figures[i].second)));
  const auto& [first_a, first_b] = result.figures.front();
  check.measured = std::min(first_a, first_b);
  check.expected = std::max(first_a, first_b);
  check.unit = "GB/s";
  check.message = fmt::format(
      "halves' all-reduce, {} round{} ({}); {}", result.rounds, result.rounds == 1 ? "" : "s",
      fmt::join(rounds, "; "),
      pair_nodes.empty()
          ? std::string("no half 25% slower than the other: node pairs not run (split-half "
                        "finds a slow node, not a slow link between two healthy ones)")
          : fmt::format("node pairs only among {}", fmt::join(pair_nodes, ",")));
  return check;
}

}  // namespace ccscope::diag

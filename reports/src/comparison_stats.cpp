// Statistics for `ccscope compare`; see comparison_stats.h.
#include "ccscope/reports/comparison_stats.h"

#include "ccscope/common/statistics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>

namespace ccscope::reports {

namespace {

// Number of orderings of n1 x's and n2 y's giving each U = #(x > y), by the
// recurrence on the largest value: it is an x (adds n2 to U) or a y.
std::vector<double> u_distribution(int n1, int n2) {
  // counts[i][j][u] built bottom-up; sizes are tiny (n <= 10).
  std::vector<std::vector<std::vector<double>>> c(n1 + 1, std::vector<std::vector<double>>(n2 + 1));
  for (int i = 0; i <= n1; ++i)
    for (int j = 0; j <= n2; ++j) {
      c[i][j].assign(static_cast<size_t>(i * j + 1), 0.0);
      if (i == 0 || j == 0) {
        c[i][j][0] = 1;
        continue;
      }
      for (int u = 0; u <= i * j; ++u) {
        double with_x = u - j >= 0 ? c[i - 1][j][static_cast<size_t>(u - j)] : 0;
        double with_y = u <= i * (j - 1) ? c[i][j - 1][static_cast<size_t>(u)] : 0;
        c[i][j][static_cast<size_t>(u)] = with_x + with_y;
      }
    }
  return c[n1][n2];
}

}  // namespace

MannWhitney mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y) {
  MannWhitney r;
  if (x.empty() || y.empty()) return r;
  bool ties = false;
  for (double a : x)
    for (double b : y) {
      if (a > b) r.u += 1;
      if (a == b) r.u += 0.5, ties = true;
    }
  const double n1 = static_cast<double>(x.size()), n2 = static_cast<double>(y.size());
  std::map<double, int> counts;  // ties across both samples
  for (double v : x) ++counts[v];
  for (double v : y) ++counts[v];
  for (const auto& [v, t] : counts) ties |= t > 1;

  if (!ties && x.size() <= 10 && y.size() <= 10) {
    std::vector<double> dist =
        u_distribution(static_cast<int>(x.size()), static_cast<int>(y.size()));
    double total = 0, below = 0, above = 0;
    for (size_t u = 0; u < dist.size(); ++u) {
      total += dist[u];
      if (static_cast<double>(u) <= r.u) below += dist[u];
      if (static_cast<double>(u) >= r.u) above += dist[u];
    }
    r.p_value = std::min(1.0, 2 * std::min(below, above) / total);
    r.exact = true;
    return r;
  }
  const double n = n1 + n2;
  double tie_term = 0;
  for (const auto& [v, t] : counts) tie_term += std::pow(t, 3) - t;
  const double variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (variance <= 0) return r;  // every value equal
  const double z = std::max(0.0, std::fabs(r.u - n1 * n2 / 2) - 0.5) / std::sqrt(variance);
  r.p_value = std::erfc(z / std::sqrt(2.0));
  return r;
}

RatioInterval median_ratio_interval(const std::vector<double>& num, const std::vector<double>& den,
                                    double confidence, int resamples, uint64_t seed) {
  if (num.empty() || den.empty()) throw std::invalid_argument("median ratio of no values");
  RatioInterval r;
  r.ratio = median(num) / median(den);
  std::mt19937_64 rng(seed);
  std::vector<double> ratios, a(num.size()), b(den.size());
  ratios.reserve(static_cast<size_t>(resamples));
  for (int i = 0; i < resamples; ++i) {
    for (auto& v : a) v = num[rng() % num.size()];
    for (auto& v : b) v = den[rng() % den.size()];
    ratios.push_back(median(a) / median(b));
  }
  std::sort(ratios.begin(), ratios.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(std::clamp(q * (resamples - 1), 0.0, resamples - 1.0));
    return ratios[i];
  };
  r.low = at((1 - confidence) / 2);
  r.high = at(1 - (1 - confidence) / 2);
  return r;
}

std::optional<AlphaBetaFit> fit_alpha_beta(const std::vector<double>& s,
                                           const std::vector<double>& t) {
  const size_t n = std::min(s.size(), t.size());
  if (n < 2 || *std::min_element(s.begin(), s.begin() + static_cast<long>(n)) ==
                   *std::max_element(s.begin(), s.begin() + static_cast<long>(n)))
    return std::nullopt;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] < s[b]; });
  double peak = 0;
  for (size_t i = 0; i < n; ++i) peak = std::max(peak, t[i] > 0 ? s[i] / t[i] : 0);
  std::vector<bool> large(n, false);
  for (size_t i = 0; i < n; ++i) large[i] = t[i] > 0 && s[i] / t[i] >= peak / 2;
  large[order[n - 1]] = large[order[n - 2]] = true;

  // Least-squares slope over the large sizes.
  double ms = 0, mt = 0, k = 0;
  for (size_t i = 0; i < n; ++i)
    if (large[i]) ms += s[i], mt += t[i], k += 1;
  ms /= k, mt /= k;
  double sst = 0, ss = 0;
  for (size_t i = 0; i < n; ++i)
    if (large[i]) sst += (s[i] - ms) * (t[i] - mt), ss += (s[i] - ms) * (s[i] - ms);
  AlphaBetaFit fit;
  fit.beta_s_per_B = ss > 0 ? std::max(0.0, sst / ss) : 0;  // a negative slope is noise
  // alpha with beta fixed: the mean remaining time over the small sizes.
  bool any_small = std::find(large.begin(), large.end(), false) != large.end();
  double sum = 0, m = 0;
  for (size_t i = 0; i < n; ++i)
    if (!large[i] || !any_small) sum += t[i] - fit.beta_s_per_B * s[i], m += 1;
  fit.alpha_s = std::max(0.0, sum / m);
  for (size_t i = 0; i < n; ++i) {
    double model = fit.alpha_s + fit.beta_s_per_B * s[i];
    double res = t[i] > 0 ? (t[i] - model) / t[i] : 0;
    fit.residuals.push_back(res);
    fit.max_abs_residual = std::max(fit.max_abs_residual, std::fabs(res));
  }
  return fit;
}

}  // namespace ccscope::reports

#include "ccscope/diag/clock_offset.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "ccscope/collectives/error.h"
#include "ccscope/common/text.h"

namespace ccscope::diag {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

[[noreturn]] void throw_malformed(std::string_view entry, std::string_view why) {
  throw UsageError(fmt::format("{}: bad entry '{}' ({}); expected HOST=MS[,HOST=MS...]",
                               kTestClockOffsetVariable, entry, why));
}

// Nanoseconds since the epoch of the wall clock, plus this rank's injected
// offset. Integers on the wire and in the arithmetic: a double of seconds since
// 1970 only resolves about 0.24 us.
int64_t wall_clock_ns(int64_t injected_ns) {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count() + injected_ns;
}

void validate_roles(const PointToPoint& p2p, int reference, const std::vector<int>& remotes,
                    const ClockOptions& options) {
  const int size = p2p.size();
  if (reference < 0 || reference >= size)
    throw UsageError(
        fmt::format("clock offsets: reference rank {} is not in [0, {})", reference, size));
  for (size_t i = 0; i < remotes.size(); ++i) {
    const int remote = remotes[i];
    if (remote < 0 || remote >= size)
      throw UsageError(
          fmt::format("clock offsets: remote rank {} is not in [0, {})", remote, size));
    if (remote == reference)
      throw UsageError(
          fmt::format("clock offsets: rank {} is both the reference and a remote", remote));
    if (std::find(remotes.begin(), remotes.begin() + static_cast<std::ptrdiff_t>(i), remote) !=
        remotes.begin() + static_cast<std::ptrdiff_t>(i))
      throw UsageError(fmt::format("clock offsets: remote rank {} is listed twice", remote));
  }
  if (options.exchanges == 0) throw UsageError("clock offsets: exchanges must be at least 1");
  if (!std::isfinite(options.injected_offset_s))
    throw UsageError("clock offsets: the injected offset is not finite");
}

// The reference's side with one remote: ping (how many pings follow), pong
// (t1, t2 in the remote's nanoseconds).
ClockEstimate ping_remote(PointToPoint& p2p, int remote, size_t exchanges, int64_t injected_ns) {
  std::vector<ClockSample> samples;
  samples.reserve(exchanges);
  int64_t origin_ns = 0;
  for (size_t i = 0; i < exchanges; ++i) {
    const int64_t remaining = static_cast<int64_t>(exchanges - 1 - i);
    std::array<int64_t, 2> pong{};
    const int64_t t0 = wall_clock_ns(injected_ns);
    p2p.send(remote, &remaining, sizeof remaining);
    p2p.recv(remote, pong.data(), sizeof pong);
    const int64_t t3 = wall_clock_ns(injected_ns);
    if (i == 0) origin_ns = t0;
    const auto seconds = [origin_ns](int64_t ns) {
      return static_cast<double>(ns - origin_ns) * 1e-9;
    };
    samples.push_back({seconds(t0), seconds(pong[0]), seconds(pong[1]), seconds(t3)});
  }
  return estimate_clock_offset(samples);
}

// The remote's side: answer pings until the one that says none follow.
void answer_reference(PointToPoint& p2p, int reference, int64_t injected_ns) {
  int64_t remaining = 0;
  do {
    p2p.recv(reference, &remaining, sizeof remaining);
    std::array<int64_t, 2> pong{};
    pong[0] = wall_clock_ns(injected_ns);
    pong[1] = wall_clock_ns(injected_ns);
    p2p.send(reference, pong.data(), sizeof pong);
  } while (remaining > 0);
}

std::string format_ms(double seconds) { return fmt::format("{:.3f} ms", seconds * 1e3); }

}  // namespace

ClockEstimate estimate_clock_offset(std::span<const ClockSample> samples) {
  ClockEstimate estimate;
  estimate.error_bound_s = kInfinity;
  estimate.min_rtt_s = kInfinity;
  for (const ClockSample& sample : samples) {
    if (!std::isfinite(sample.t0) || !std::isfinite(sample.t1) || !std::isfinite(sample.t2) ||
        !std::isfinite(sample.t3))
      continue;
    const double rtt = (sample.t3 - sample.t0) - (sample.t2 - sample.t1);
    // Negative: the remote held the message longer than the whole round trip,
    // or t2 < t1; a clock stepped (or the sample is garbage).
    if (rtt < 0 || sample.t2 < sample.t1) continue;
    ++estimate.samples;
    if (rtt < estimate.min_rtt_s) {
      estimate.min_rtt_s = rtt;
      estimate.offset_s = ((sample.t1 - sample.t0) + (sample.t2 - sample.t3)) / 2;
      estimate.error_bound_s = rtt / 2;
    }
  }
  return estimate;
}

double injected_clock_offset_s(const std::string& value, const std::string& hostname) {
  const std::string_view short_hostname = std::string_view(hostname).substr(0, hostname.find('.'));
  std::vector<std::string_view> hosts_seen;
  double offset_s = 0;
  std::string_view rest = value;
  if (trimmed(rest).empty()) return 0;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view entry = trimmed(rest.substr(0, comma));
    const size_t equals = entry.find('=');
    if (equals == std::string_view::npos) throw_malformed(entry, "no '='");
    const std::string_view host = trimmed(entry.substr(0, equals));
    const std::string_view ms_text = trimmed(entry.substr(equals + 1));
    if (host.empty()) throw_malformed(entry, "empty host");
    double ms = 0;
    const char* ms_end = ms_text.data() + ms_text.size();
    const auto [parsed_end, error] = std::from_chars(ms_text.data(), ms_end, ms);
    if (ms_text.empty() || error != std::errc() || parsed_end != ms_end || !std::isfinite(ms))
      throw_malformed(entry, "MS is not a number of milliseconds");
    if (std::find(hosts_seen.begin(), hosts_seen.end(), host) != hosts_seen.end())
      throw_malformed(entry, "host listed twice");
    hosts_seen.push_back(host);
    if (host == hostname || host == short_hostname) offset_s = ms * 1e-3;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return offset_s;
}

double injected_clock_offset_from_process_s(const std::string& hostname) {
  const char* value = std::getenv(kTestClockOffsetVariable);
  return value == nullptr ? 0 : injected_clock_offset_s(value, hostname);
}

std::vector<ClockEstimate> measure_clock_offsets(PointToPoint& p2p, int reference,
                                                 const std::vector<int>& remotes,
                                                 const ClockOptions& options) {
  validate_roles(p2p, reference, remotes, options);
  const auto injected_ns = static_cast<int64_t>(std::llround(options.injected_offset_s * 1e9));
  std::vector<ClockEstimate> estimates;
  if (p2p.rank() == reference) {
    for (const int remote : remotes)
      estimates.push_back(ping_remote(p2p, remote, options.exchanges, injected_ns));
  } else if (std::find(remotes.begin(), remotes.end(), p2p.rank()) != remotes.end()) {
    answer_reference(p2p, reference, injected_ns);
  }
  return estimates;
}

std::vector<Check> judge_clock_offsets(const std::vector<std::string>& remote_hosts,
                                       const std::vector<ClockEstimate>& estimates,
                                       const std::string& reference_host, double warn_threshold_s) {
  if (remote_hosts.size() != estimates.size())
    throw UsageError(fmt::format("clock offsets: {} remote hosts but {} estimates",
                                 remote_hosts.size(), estimates.size()));
  if (!std::isfinite(warn_threshold_s) || warn_threshold_s < 0)
    throw UsageError("clock offsets: the warning threshold must be a finite number >= 0");
  Check base;
  base.stage = Stage::kCluster;
  base.name = "cluster.clock_offset";
  base.expected = warn_threshold_s * 1e3;
  base.unit = "ms";
  std::vector<Check> checks;
  if (remote_hosts.empty()) {
    Check check = base;
    check.status = Status::kSkip;
    check.host = reference_host;
    check.message = fmt::format("one node ({}): no other clock to compare with", reference_host);
    checks.push_back(std::move(check));
    return checks;
  }
  for (size_t i = 0; i < remote_hosts.size(); ++i) {
    const ClockEstimate& estimate = estimates[i];
    Check check = base;
    check.host = remote_hosts[i];
    check.peer = reference_host;
    if (estimate.samples == 0 || !std::isfinite(estimate.error_bound_s)) {
      check.status = Status::kSkip;
      check.message = fmt::format("no valid ping-pong between {} and {}: offset not measured",
                                  reference_host, remote_hosts[i]);
      checks.push_back(std::move(check));
      continue;
    }
    check.measured = estimate.offset_s * 1e3;
    const double magnitude = std::abs(estimate.offset_s);
    const std::string seen = fmt::format(
        "{}'s clock is {} {} {}'s (+- {}, {} samples, min round trip {})", remote_hosts[i],
        format_ms(magnitude), estimate.offset_s >= 0 ? "ahead of" : "behind", reference_host,
        format_ms(estimate.error_bound_s), estimate.samples, format_ms(estimate.min_rtt_s));
    if (magnitude - estimate.error_bound_s > warn_threshold_s) {
      check.status = Status::kWarn;
      check.message = fmt::format("{}: above the {} threshold", seen, format_ms(warn_threshold_s));
      check.remedy = fmt::format(
          "synchronise {}'s clock: check chrony (chronyc tracking), ntpd (ntpq -p) or PTP "
          "(ptp4l/phc2sys) on it and on {}; timelines across nodes are off by this much",
          remote_hosts[i], reference_host);
    } else if (magnitude > warn_threshold_s) {
      check.status = Status::kPass;
      check.message = fmt::format(
          "{}: uncertain, the round trip is too long to tell whether it is above the {} "
          "threshold",
          seen, format_ms(warn_threshold_s));
    } else {
      check.status = Status::kPass;
      check.message = fmt::format("{}: within the {} threshold", seen, format_ms(warn_threshold_s));
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

}  // namespace ccscope::diag

// The egress shaper on an interface, read from the kernel over rtnetlink
// (what `tc qdisc show dev X` prints): the rate of its tbf qdiscs. ci/vcluster
// shapes each link as an htb root whose class carries a tbf child at the link
// rate; the htb class's own 100gbit ceiling is not the link's rate, so only tbf
// counts.
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/topo/sysfs.h"

namespace ccscope::topo {
namespace {

// Closes the socket however the reading ends.
class NetlinkSocket {
 public:
  NetlinkSocket() : fd_(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) {}
  ~NetlinkSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  NetlinkSocket(const NetlinkSocket&) = delete;
  NetlinkSocket& operator=(const NetlinkSocket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// An attribute's payload as T, when it is large enough to hold one.
template <typename T>
std::optional<T> payload_as(const rtattr* attribute) {
  if (RTA_PAYLOAD(attribute) < sizeof(T)) return std::nullopt;
  T value;
  std::memcpy(&value, RTA_DATA(attribute), sizeof(T));  // payloads are only 4-byte aligned
  return value;
}

// A tbf qdisc's rate in bytes/s from its TCA_OPTIONS: TCA_TBF_RATE64 when the
// rate does not fit tc_ratespec's 32 bits (above ~34.4 Gbit/s), else PARMS.
std::optional<uint64_t> tbf_rate_bytes_per_s(const rtattr* options) {
  std::optional<uint64_t> rate32, rate64;
  int length = static_cast<int>(RTA_PAYLOAD(options));
  for (const rtattr* attribute = static_cast<const rtattr*>(RTA_DATA(options));
       RTA_OK(attribute, length); attribute = RTA_NEXT(attribute, length)) {
    switch (attribute->rta_type & NLA_TYPE_MASK) {
      case TCA_TBF_PARMS:
        if (const auto parms = payload_as<tc_tbf_qopt>(attribute)) rate32 = parms->rate.rate;
        break;
      case TCA_TBF_RATE64:
        rate64 = payload_as<uint64_t>(attribute);
        break;
      default:
        break;
    }
  }
  if (rate64 && *rate64 > 0) return rate64;
  if (rate32 && *rate32 > 0) return rate32;
  return std::nullopt;
}

// The tbf rate (bytes/s) of one RTM_NEWQDISC message of interface `ifindex`.
std::optional<uint64_t> tbf_rate_of_message(const nlmsghdr* message, int ifindex) {
  if (message->nlmsg_len < NLMSG_LENGTH(sizeof(tcmsg))) return std::nullopt;
  const auto* qdisc = static_cast<const tcmsg*>(NLMSG_DATA(message));
  if (qdisc->tcm_ifindex != ifindex) return std::nullopt;
  bool is_tbf = false;
  const rtattr* options = nullptr;
  int length = static_cast<int>(message->nlmsg_len - NLMSG_LENGTH(sizeof(tcmsg)));
  for (const rtattr* attribute = TCA_RTA(qdisc); RTA_OK(attribute, length);
       attribute = RTA_NEXT(attribute, length)) {
    if (attribute->rta_type == TCA_KIND) {
      const char* kind = static_cast<const char*>(RTA_DATA(attribute));
      is_tbf = std::string(kind, strnlen(kind, RTA_PAYLOAD(attribute))) == "tbf";
    } else if ((attribute->rta_type & NLA_TYPE_MASK) == TCA_OPTIONS) {
      options = attribute;
    }
  }
  if (!is_tbf || options == nullptr) return std::nullopt;
  return tbf_rate_bytes_per_s(options);
}

}  // namespace

double egress_shaped_Gbps(const std::string& ifname) {
  const unsigned ifindex = ::if_nametoindex(ifname.c_str());
  if (ifindex == 0) return 0;
  NetlinkSocket netlink;
  if (netlink.fd() < 0) return 0;
  // A dump that never finishes must not hang the probe.
  const timeval receive_timeout{2, 0};
  if (::setsockopt(netlink.fd(), SOL_SOCKET, SO_RCVTIMEO, &receive_timeout,
                   sizeof receive_timeout) != 0)
    return 0;

  struct {
    nlmsghdr header;
    tcmsg qdisc;
  } request{};
  request.header.nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
  request.header.nlmsg_type = RTM_GETQDISC;
  request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  request.header.nlmsg_seq = 1;
  request.qdisc.tcm_family = AF_UNSPEC;
  request.qdisc.tcm_ifindex = static_cast<int>(ifindex);  // newer kernels dump only this one
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(netlink.fd(), &request, request.header.nlmsg_len, 0,
               reinterpret_cast<const sockaddr*>(&kernel), sizeof kernel) < 0)
    return 0;

  std::optional<uint64_t> lowest_bytes_per_s;
  // A dump part is at most 32 KiB; a larger buffer never truncates one.
  std::vector<char> buffer(64 * 1024);
  for (;;) {
    iovec chunk{buffer.data(), buffer.size()};
    msghdr received{};
    received.msg_iov = &chunk;
    received.msg_iovlen = 1;
    const ssize_t bytes = ::recvmsg(netlink.fd(), &received, 0);
    if (bytes <= 0 || (received.msg_flags & MSG_TRUNC) != 0) return 0;  // timeout, error
    int remaining = static_cast<int>(bytes);
    for (const auto* message = reinterpret_cast<const nlmsghdr*>(buffer.data());
         NLMSG_OK(message, remaining); message = NLMSG_NEXT(message, remaining)) {
      if (message->nlmsg_seq != request.header.nlmsg_seq) continue;
      if (message->nlmsg_type == NLMSG_DONE) {
        if (!lowest_bytes_per_s) return 0;
        return static_cast<double>(*lowest_bytes_per_s) * 8.0 / 1e9;
      }
      if (message->nlmsg_type == NLMSG_ERROR) return 0;
      if (message->nlmsg_type != RTM_NEWQDISC) continue;
      if (const auto rate = tbf_rate_of_message(message, static_cast<int>(ifindex)))
        lowest_bytes_per_s = std::min(lowest_bytes_per_s.value_or(*rate), *rate);
    }
  }
}

}  // namespace ccscope::topo

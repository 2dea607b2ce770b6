#include "ras_stub.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

namespace ccscope::standin {

const std::vector<std::string>& ras_collective_names() {
  // The stand-in's Kind order: all-reduce, reduce, broadcast, all-gather,
  // reduce-scatter, all-to-all, send, recv.
  static const std::vector<std::string> names = {
      "AllReduce", "Reduce", "Broadcast", "AllGather", "ReduceScatter", "AlltoAll", "Send", "Recv"};
  return names;
}

namespace {

std::string rank_tail(const RasRankView& r) {
  return " -- GPU " + std::to_string(r.gpu) + " managed by process " + std::to_string(r.pid) +
         " on node " + r.host;
}

}  // namespace

std::string ras_status_report(const std::vector<RasCommView>& comms) {
  std::string errors, dead;
  size_t dead_count = 0;
  for (size_t c = 0; c < comms.size(); ++c) {
    const RasCommView& comm = comms[c];
    const std::string head = "#" + std::to_string(c) + "-0 (" + comm.id + ") ";
    std::string incomplete;
    size_t missing = 0;
    for (const RasRankView& r : comm.ranks) {
      if (!r.gone) continue;
      ++missing;
      incomplete += "  Rank " + std::to_string(r.rank) + rank_tail(r) + "\n";
      const std::string process = "  Process " + std::to_string(r.pid) + " on node " + r.host +
                                  " managing GPU " + std::to_string(r.gpu) + "\n";
      if (dead.find(process) == std::string::npos) dead += process, ++dead_count;
    }
    if (missing > 0)
      errors += head + "INCOMPLETE\n  Missing communicator data from " + std::to_string(missing) +
                " rank" + (missing == 1 ? "" : "s") + "\n" + incomplete + "\n";
    // Per collective: the ranks that launched the most, in one line; every other
    // rank listed with its own count (the ranks behind).
    std::string mismatch;
    for (size_t k = 0; k < ras_collective_names().size(); ++k) {
      std::map<uint64_t, std::vector<const RasRankView*>> by_count;
      for (const RasRankView& r : comm.ranks)
        if (!r.gone && k < r.launched.size()) by_count[r.launched[k]].push_back(&r);
      if (by_count.size() < 2) continue;
      const auto& [most, leaders] = *by_count.rbegin();
      mismatch += "  Communicator ranks have different " + ras_collective_names()[k] +
                  " operation counts\n  " + std::to_string(leaders.size()) +
                  " ranks have launched up to operation " + std::to_string(most) + "\n";
      for (const auto& [count, ranks] : by_count) {
        if (count == most) continue;
        for (const RasRankView* r : ranks)
          mismatch += "  Rank " + std::to_string(r->rank) +
                      (count == 0 ? std::string(" has not launched any operations")
                                  : " has launched up to operation " + std::to_string(count)) +
                      rank_tail(*r) + "\n";
      }
    }
    if (!mismatch.empty()) errors += head + "MISMATCH\n" + mismatch + "\n";
  }
  std::string out = "Errors\n======\n\n";
  if (dead_count > 0)
    out += "DEAD\n  " + std::to_string(dead_count) + " job process" +
           (dead_count == 1 ? " is" : "es are") +
           " considered dead (unreachable via the RAS network)\n" + dead + "\n";
  return out + errors + "Warnings\n========\n\n";
}

namespace {

// "host:port", "host" or ":port"; the stand-in binds IPv4 only.
bool ras_address(sockaddr_in& address) {
  const char* enable = std::getenv("NCCL_RAS_ENABLE");
  const char* text = std::getenv("NCCL_RAS_ADDR");
  if ((enable != nullptr && std::string(enable) == "0") || text == nullptr || *text == '\0')
    return false;
  std::string host = text, port = "28028";
  if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::atoi(port.c_str())));
  return inet_pton(AF_INET, host.c_str(), &address.sin_addr) == 1;
}

void serve_client(int fd, const std::function<std::vector<RasCommView>()>& snapshot) {
  timeval limit{5, 0};  // a client that stops talking is dropped
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  auto send_text = [fd](const std::string& text) {
    (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
  };
  std::string pending;
  char chunk[256];
  for (;;) {
    const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
    if (got <= 0) return;
    pending.append(chunk, static_cast<size_t>(got));
    for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
      const std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      if (line.rfind("CLIENT PROTOCOL", 0) == 0) {
        send_text("SERVER PROTOCOL 2\n");
      } else if (line.rfind("TIMEOUT", 0) == 0) {
        send_text("OK\n");
      } else if (line.find("STATUS") != std::string::npos) {
        send_text(ras_status_report(snapshot()));
        return;
      } else {
        send_text("ERROR: unknown command\n");
        return;
      }
    }
  }
}

}  // namespace

void start_ras_service_once(std::function<std::vector<RasCommView>()> snapshot) {
  static std::once_flag once;
  std::call_once(once, [&] {
    sockaddr_in address{};
    if (!ras_address(address)) return;
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) return;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener, 4) != 0) {
      ::close(listener);  // another process of this host serves
      return;
    }
    std::thread([listener, snapshot = std::move(snapshot)] {
      for (;;) {
        const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          continue;
        }
        serve_client(fd, snapshot);
        ::close(fd);
      }
    }).detach();
  });
}

}  // namespace ccscope::standin

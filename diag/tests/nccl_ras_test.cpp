// NCCL RAS: the STATUS report's reading and findings, and the client protocol
// against a stub service (a TCP server on loopback answering as NCCL's RAS
// thread does: "SERVER PROTOCOL 2", "OK" to TIMEOUT, the report, then close).
#include "ccscope/diag/nccl_ras.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "ccscope/job/watchdog.h"

namespace ccscope::diag {
namespace {

// A report as NCCL 2.24-2.29 prints it (src/ras/client_support.cc's formats):
// 8 ranks on 2 nodes, rank 5 (node1) one all-reduce behind the other 7.
const char* const kRankBehind = R"(Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      2          4            1          8        8

Communicators... (0.01s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2         4         8         8   RUNNING  MISMATCH

Errors
======

Warnings
========

#0-0 (9e8a5b7c1d2f3a40) MISMATCH
  Communicator ranks have different AllReduce operation counts
  7 ranks have launched up to operation 120
  Rank 5 has launched up to operation 119 -- GPU 1 managed by process 4242 on node node1

)";

// A process gone: RAS calls it dead, and its communicator rank has no data.
const char* const kDeadProcess = R"(Communicators... (5.02s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2         4         8         7   RUNNING  INCOMPLETE

Errors
======

DEAD
  1 job process is considered dead (unreachable via the RAS network)
  Process 4242 on node node1 managing GPU 1

#0-0 (9e8a5b7c1d2f3a40) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 5 -- GPU 1 managed by process 4242 on node node1

Warnings
========

TIMEOUT
  Encountered 2 communication timeouts while gathering communicator data

)";

const char* const kHealthy = R"(Communicators... (0.00s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2         4         8         8   RUNNING      OK

Errors
======

Warnings
========

)";

// A stub of NCCL's RAS service on 127.0.0.1 (an ephemeral port), one client.
// mode: "ras" answers the protocol with `report`; "silent" accepts and never
// answers (a hung process); "http" answers something else.
class RasStub {
 public:
  RasStub(std::string mode, std::string report)
      : mode_(std::move(mode)), report_(std::move(report)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(listener_, 1), 0);
    socklen_t length = sizeof address;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~RasStub() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    done_ = true;
    thread_.join();
  }
  int port() const { return port_; }
  std::string received() const { return received_; }

 private:
  std::string read_line(int fd) {
    std::string line;
    char c = 0;
    while (::recv(fd, &c, 1, 0) == 1) {
      line += c;
      if (c == '\n') break;
    }
    received_ += line;
    return line;
  }
  void send_text(int fd, const std::string& text) {
    (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
  }
  void serve() {
    const int fd = ::accept(listener_, nullptr, nullptr);
    if (fd < 0) return;
    if (mode_ == "silent") {
      while (!done_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else if (mode_ == "http") {
      read_line(fd);
      send_text(fd, "HTTP/1.1 400 Bad Request\r\n\r\n");
    } else {
      for (std::string line = read_line(fd); !line.empty(); line = read_line(fd)) {
        if (line.rfind("CLIENT PROTOCOL ", 0) == 0) send_text(fd, "SERVER PROTOCOL 2\n");
        if (line.rfind("TIMEOUT ", 0) == 0) send_text(fd, "OK\n");
        if (line == "STATUS\n") {
          send_text(fd, report_);
          break;
        }
      }
    }
    ::close(fd);
  }
  std::string mode_, report_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> done_{false};
  std::string received_;
  std::thread thread_;
};

const NcclLogFinding* find(const std::vector<NcclLogFinding>& findings, const std::string& code) {
  for (const auto& f : findings)
    if (f.code == code) return &f;
  return nullptr;
}

TEST(NcclRas, AHungRankIsNamedWithRasEvidence) {
  RasStub stub("ras", kRankBehind);
  const NcclRasAddress address{"127.0.0.1", stub.port()};
  const std::string report = query_nccl_ras(address, std::chrono::milliseconds(3000));
  // The client's side of the protocol, as ncclras sends it.
  EXPECT_EQ(stub.received(), "CLIENT PROTOCOL 2\nTIMEOUT 2\nSTATUS\n");
  const NcclRasStatus status = parse_nccl_ras_status(report);
  EXPECT_TRUE(status.report);
  EXPECT_TRUE(status.complete);
  ASSERT_EQ(status.behind.size(), 1u);
  EXPECT_EQ(status.behind[0].rank, 5);
  EXPECT_EQ(status.behind[0].host, "node1");
  EXPECT_EQ(status.behind[0].pid, 4242);
  EXPECT_EQ(status.behind[0].operations, 119);
  EXPECT_EQ(status.behind[0].others, 120);
  const auto findings = nccl_ras_findings(status, to_string(address));
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].code, "ras.ranks_behind");
  EXPECT_EQ(findings[0].severity, NcclSeverity::kFail);
  EXPECT_EQ(findings[0].rank, 5);
  EXPECT_EQ(findings[0].host, "node1");
  EXPECT_NE(findings[0].message.find("rank 5 (pid 4242 on node1, GPU 1) launched 119 AllReduce "
                                     "operations where others reached 120"),
            std::string::npos)
      << findings[0].message;
}

// A hang's stall report: the watchdog's reporting rank runs the hook diag sets
// (set_stall_evidence), bounded; the rank behind is named with RAS's evidence.
TEST(NcclRas, AStallReportCarriesRasEvidenceWithinItsBound) {
  RasStub stub("ras", kRankBehind);
  const NcclRasAddress address{"127.0.0.1", stub.port()};
  const std::string evidence = stall_evidence_within(
      [address] {
        return nccl_ras_stall_evidence(ask_nccl_ras(address, std::chrono::milliseconds(2000)));
      },
      std::chrono::milliseconds(2500));
  EXPECT_EQ(evidence.rfind("ccscope: NCCL RAS: FAIL ras.ranks_behind: NCCL RAS (127.0.0.1:", 0), 0u)
      << evidence;
  EXPECT_NE(evidence.find("rank 5 (pid 4242 on node1, GPU 1) launched 119 AllReduce"),
            std::string::npos)
      << evidence;
  // A service that never answers: the report goes on after the bound.
  RasStub silent("silent", "");
  const NcclRasAddress quiet{"127.0.0.1", silent.port()};
  const auto started = std::chrono::steady_clock::now();
  const std::string none = stall_evidence_within(
      [quiet] {
        return nccl_ras_stall_evidence(ask_nccl_ras(quiet, std::chrono::milliseconds(400)));
      },
      std::chrono::milliseconds(1000));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(900));
  EXPECT_EQ(none.rfind("ccscope: NCCL RAS: INFO ras.unreachable: NCCL RAS (127.0.0.1:", 0), 0u)
      << none;
  EXPECT_TRUE(nccl_version_has_ras("2.24.3"));
  EXPECT_TRUE(nccl_version_has_ras("3.0.0"));
  EXPECT_TRUE(nccl_version_has_ras(""));
  EXPECT_FALSE(nccl_version_has_ras("2.23.4"));
  EXPECT_FALSE(nccl_version_has_ras("2.9.9"));
}

TEST(NcclRas, ADeadProcessAndItsMissingRank) {
  const NcclRasStatus status = parse_nccl_ras_status(kDeadProcess);
  ASSERT_EQ(status.dead.size(), 1u);
  EXPECT_EQ(status.dead[0].pid, 4242);
  EXPECT_EQ(status.dead[0].host, "node1");
  EXPECT_EQ(status.dead_count, 1u);
  ASSERT_EQ(status.incomplete_ranks.size(), 1u);
  EXPECT_EQ(status.incomplete_ranks[0].rank, 5);
  EXPECT_EQ(status.timeouts, 2u);
  EXPECT_TRUE(status.behind.empty());
  const auto findings = nccl_ras_findings(status, "node0:28028");
  std::vector<std::string> codes;
  for (const auto& f : findings) codes.push_back(f.code);
  EXPECT_EQ(codes, (std::vector<std::string>{"ras.dead_processes", "ras.incomplete_ranks",
                                             "ras.timeouts"}));
  EXPECT_EQ(find(findings, "ras.dead_processes")->host, "node1");
  EXPECT_EQ(find(findings, "ras.incomplete_ranks")->rank, 5);
}

TEST(NcclRas, HealthyAndNotAReport) {
  const auto healthy = nccl_ras_findings(parse_nccl_ras_status(kHealthy), "localhost:28028");
  ASSERT_EQ(healthy.size(), 1u);
  EXPECT_EQ(healthy[0].code, "ras.healthy");
  EXPECT_EQ(healthy[0].severity, NcclSeverity::kInfo);
  EXPECT_FALSE(parse_nccl_ras_status("hello\nworld\n").report);
}

TEST(NcclRas, AServiceThatDoesNotAnswerIsCutShortByTheTimeout) {
  RasStub stub("silent", "");
  const auto started = std::chrono::steady_clock::now();
  try {
    query_nccl_ras({"127.0.0.1", stub.port()}, std::chrono::milliseconds(300));
    FAIL() << "a silent service answered";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no answer within 300 ms"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
}

TEST(NcclRas, SomethingElseOnThePortOrNothingAtAll) {
  {
    RasStub stub("http", "");
    try {
      query_nccl_ras({"127.0.0.1", stub.port()}, std::chrono::milliseconds(2000));
      FAIL() << "an HTTP server was taken for RAS";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("not NCCL's RAS service"), std::string::npos)
          << e.what();
    }
  }
  int port = 0;
  {
    RasStub closed("ras", "");  // a port nothing listens on once it is gone
    port = closed.port();
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);  // let its thread finish
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::close(fd);
  }
  EXPECT_THROW(query_nccl_ras({"127.0.0.1", port}, std::chrono::milliseconds(1000)),
               std::runtime_error);
}

TEST(NcclRas, AddressesAsNcclRasAddrWritesThem) {
  EXPECT_EQ(to_string(parse_nccl_ras_address("node0:29000")), "node0:29000");
  EXPECT_EQ(to_string(parse_nccl_ras_address("node0")), "node0:28028");
  EXPECT_EQ(to_string(parse_nccl_ras_address(":29000")), "localhost:29000");
  EXPECT_EQ(to_string(parse_nccl_ras_address("29000")), "localhost:29000");
  EXPECT_EQ(to_string(parse_nccl_ras_address("[::1]:29000")), "[::1]:29000");
  EXPECT_THROW(parse_nccl_ras_address("node0:0"), std::invalid_argument);
  EXPECT_THROW(parse_nccl_ras_address("node0:x"), std::invalid_argument);
  EXPECT_THROW(parse_nccl_ras_address(""), std::invalid_argument);
  auto env = [](std::map<std::string, std::string> vars) {
    return [vars](const char* name) -> std::optional<std::string> {
      const auto it = vars.find(name);
      return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
  };
  EXPECT_FALSE(nccl_ras_address_from_environment(env({{"NCCL_RAS_ENABLE", "0"}})).has_value());
  EXPECT_EQ(to_string(*nccl_ras_address_from_environment(env({}))), "localhost:28028");
  EXPECT_EQ(
      to_string(*nccl_ras_address_from_environment(env({{"NCCL_RAS_ADDR", "10.0.0.1:1234"}}))),
      "10.0.0.1:1234");
}

}  // namespace
}  // namespace ccscope::diag

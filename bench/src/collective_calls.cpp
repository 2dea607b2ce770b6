#include "collective_calls.h"

#include <stdexcept>
#include <string>

namespace ccscope::bench {
namespace {

struct CallEntry {
  Collective id;
  CollectiveCall call;
};

// One entry per collective: how bench issues it.
constexpr CallEntry kCalls[] = {
    {Collective::kAllReduce,
     [](Communicator& c, const CollectiveArgs& a) {
       c.all_reduce(a.send, a.recv, a.layout->param_count, a.type, a.op);
     }},
    {Collective::kAllGather,
     [](Communicator& c, const CollectiveArgs& a) {
       c.all_gather(a.send, a.recv, a.layout->param_count, a.type);
     }},
    {Collective::kReduceScatter,
     [](Communicator& c, const CollectiveArgs& a) {
       c.reduce_scatter(a.send, a.recv, a.layout->param_count, a.type, a.op);
     }},
    {Collective::kBroadcast,
     [](Communicator& c, const CollectiveArgs& a) {
       c.broadcast(a.send, a.recv, a.layout->param_count, a.type, a.root);
     }},
    {Collective::kAllToAll,
     [](Communicator& c, const CollectiveArgs& a) {
       c.all_to_all(a.send, a.recv, a.layout->param_count, a.type);
     }},
    {Collective::kSendRecv,
     [](Communicator& c, const CollectiveArgs& a) {
       // A ring: to rank+1, from rank-1.
       const int rank = c.rank();
       const int size = c.size();
       c.send_recv(a.send, (rank + 1) % size, a.recv, (rank + size - 1) % size,
                   a.layout->param_count, a.type);
     }},
    {Collective::kReduce,
     [](Communicator& c, const CollectiveArgs& a) {
       c.reduce(a.send, a.recv, a.layout->param_count, a.type, a.op, a.root);
     }},
    {Collective::kGather,
     [](Communicator& c, const CollectiveArgs& a) {
       c.gather(a.send, a.recv, a.layout->param_count, a.type, a.root);
     }},
    {Collective::kScatter,
     [](Communicator& c, const CollectiveArgs& a) {
       c.scatter(a.send, a.recv, a.layout->param_count, a.type, a.root);
     }},
    {Collective::kAllToAllV,
     [](Communicator& c, const CollectiveArgs& a) {
       const Layout& l = *a.layout;
       c.all_to_all_v(a.send, l.send_counts, l.send_displacements, a.recv, l.recv_counts,
                      l.recv_displacements, a.type);
     }},
};

}  // namespace

CollectiveCall collective_call(Collective collective) {
  for (const CallEntry& entry : kCalls)
    if (entry.id == collective) return entry.call;
  // A described collective without a call: a programming error a unit test catches.
  throw std::logic_error("bench has no call for collective " + std::string(name(collective)));
}

}  // namespace ccscope::bench

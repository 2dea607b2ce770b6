#pragma once
// Reference collective algorithms over PointToPoint, on host buffers. They follow
// the Communicator's argument conventions (communicator.h), including in place:
//  all_reduce:     in place when send == recv.
//  all_gather:     in place when send == recv + rank*send_count*element_size.
//  reduce_scatter: in place when recv == send + rank*recv_count*element_size.
// Every rank must call with the same count, type and op. kAvg sums, then divides
// by size() (integer types truncate toward zero). float16/bfloat16 and the fp8
// formats are combined in float and rounded back after every step (so fp8 sums
// overflow like the type: e4m3 to NaN, e5m2 to infinity). Integer sums and
// products wrap, 64-bit ones included.
// kMulSum (NCCL's pre-multiplied sum): before the first step every rank
// multiplies its own input by premul_scalar(rank), in the element type's
// arithmetic (the scalar converted to the type, the product rounded to it or
// wrapped), then the products are combined like kSum. The premultiplied copy is
// the rank's own output (all_reduce) or a scratch block (reduce_scatter), never
// the input: an out-of-place input is not modified, and in place the input is
// read with its original values, each element scaled exactly once.
#include <cstddef>
#include <span>

#include "ccscope/collectives/point_to_point.h"
#include "ccscope/collectives/types.h"

namespace ccscope {

// Ring: a reduce-scatter phase then an all-gather phase, n-1 steps each, over
// blocks of count/size elements (the first count%size blocks one larger).
void ring_all_reduce(PointToPoint& p2p, const void* send, void* recv, size_t count, DataType type,
                     ReduceOp op);
// Ring: n-1 steps, each passing one rank's block to the right neighbour.
void ring_all_gather(PointToPoint& p2p, const void* send, void* recv, size_t send_count,
                     DataType type);
// Ring: n-1 steps; block r of the reduced input ends on rank r (NCCL semantics).
// Only the output block is written; the input is never modified.
void ring_reduce_scatter(PointToPoint& p2p, const void* send, void* recv, size_t recv_count,
                         DataType type, ReduceOp op);
// Recursive doubling over the largest power of two p <= size, exchanging whole
// vectors; for other sizes the first 2*(size-p) ranks pair up first (the even one
// hands its vector to the odd one and gets the result back at the end).
void recursive_doubling_all_reduce(PointToPoint& p2p, const void* send, void* recv, size_t count,
                                   DataType type, ReduceOp op);

// Pipelined chain from `root`: root -> root+1 -> ... -> root+size-1 (mod size),
// the vector cut into chunks of `chunk_bytes` (rounded down to whole elements, at
// least one; 0: kChainBroadcastChunkBytes). In every step a rank forwards the
// previous chunk to the right while it receives the next one from the left, so a
// large vector takes about (size-2+chunks) chunk times. In place when
// send == recv; out of place the root copies send into its own recv as well.
// send is read on the root only (it may be null elsewhere).
inline constexpr size_t kChainBroadcastChunkBytes = 256 * 1024;
void chain_broadcast(PointToPoint& p2p, const void* send, void* recv, size_t count, DataType type,
                     int root, size_t chunk_bytes = 0);
// Pairwise exchange: size-1 steps; in step k block (rank+k)%size of send goes to
// that rank while block (rank-k)%size of recv comes from that rank. The own block
// is copied locally. send == recv (in place) works through a temporary copy of
// the input; other overlaps are not allowed.
void pairwise_all_to_all(PointToPoint& p2p, const void* send, void* recv, size_t count_per_peer,
                         DataType type);
// The same exchange with per-peer blocks and counts (MPI_Alltoallv): send[p]
// holds send_counts[p] elements for rank p, recv[p] receives recv_counts[p]
// from rank p; every span has size() entries. In step k this rank sends to
// (rank+k)%size and receives from (rank-k)%size, each message with its own
// size; zero counts are still exchanged (as zero-byte messages), so a count
// that does not match the peer's is a BackendError, never a hang. The own block
// is copied locally (recv_counts[rank] must equal send_counts[rank]; the two
// may be the same memory). Blocks must not overlap otherwise.
void pairwise_all_to_allv(PointToPoint& p2p, std::span<const void* const> send,
                          std::span<const size_t> send_counts, std::span<void* const> recv,
                          std::span<const size_t> recv_counts, DataType type);

// Binomial tree towards `root`: in step k (k = 1, 2, 4, ...) the ranks whose
// distance d from the root has bit k set send their partial result to d - k,
// which combines it; log2(size) steps. Only the root's recv is written (it
// ends as the reduction); in place when send == recv. Non-roots reduce in a
// scratch copy and may pass recv == nullptr.
void binomial_reduce(PointToPoint& p2p, const void* send, void* recv, size_t count, DataType type,
                     ReduceOp op, int root);
// Linear: every rank sends its block to the root, which receives them in rank
// order into block r of recv (send_count elements each) and copies its own.
// In place when send == recv + rank*send_count*element_size; recv is used on
// the root only.
void linear_gather(PointToPoint& p2p, const void* send, void* recv, size_t send_count,
                   DataType type, int root);
// Linear: the root sends block r of send (recv_count elements each) to rank r
// and copies its own; send is used on the root only. In place when
// recv == send + rank*recv_count*element_size.
void linear_scatter(PointToPoint& p2p, const void* send, void* recv, size_t recv_count,
                    DataType type, int root);

// Local kernels the algorithms use (also for backends that reduce on the host):
// out[i] = a[i] op b[i] for count elements; out may be the same pointer as a or b.
// kAvg combines like kSum; finish it with divide_elements. kMulSum combines like
// kSum too: premultiply every rank's input first (premultiply_elements).
void reduce_elements(void* out, const void* a, const void* b, size_t count, DataType type,
                     ReduceOp op);
// out[i] = in[i] * scalar in the type's arithmetic: the scalar is first rounded
// to the type (truncated for integers), the product rounded back (floating
// types, fp8 and 16-bit through float) or wrapped (integers). out may be in.
void premultiply_elements(void* out, const void* in, size_t count, DataType type, double scalar);
// data[i] /= divisor (integer types truncate toward zero).
void divide_elements(void* data, size_t count, DataType type, int divisor);

}  // namespace ccscope

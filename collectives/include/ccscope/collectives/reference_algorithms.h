#pragma once
// Reference collective algorithms over PointToPoint, on host buffers. They follow
// the Communicator's argument conventions (communicator.h), including in place:
//  all_reduce:     in place when send == recv.
//  all_gather:     in place when send == recv + rank*send_count*element_size.
//  reduce_scatter: in place when recv == send + rank*recv_count*element_size.
// Every rank must call with the same count, type and op. kAvg sums, then divides
// by size() (integer types truncate toward zero). float16/bfloat16 are combined in
// float and rounded back after every step. Integer sums and products wrap.
#include <cstddef>

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

// Local kernels the algorithms use (also for backends that reduce on the host):
// out[i] = a[i] op b[i] for count elements; out may be the same pointer as a or b.
// kAvg combines like kSum; finish it with divide_elements.
void reduce_elements(void* out, const void* a, const void* b, size_t count, DataType type,
                     ReduceOp op);
// data[i] /= divisor (integer types truncate toward zero).
void divide_elements(void* data, size_t count, DataType type, int divisor);

}  // namespace ccscope

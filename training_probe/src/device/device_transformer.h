#pragma once
// The transformer (ccscope/training_probe/transformer.h) on a GPU: transformer.cpp's
// forward and backward of one micro-batch with activations in device memory,
// its GEMMs through cuBLAS (attention's per sample and head), the rest as
// kernels.cuh's kernels in the host's operation order. Parameters and
// gradients are where the strategy's UnitHooks say (device pointers), unit by
// unit as the host model asks for them, so DDP's buckets and ZeRO's shards and
// gathers apply unchanged.
//
// Tensor parallel (TransformerParallel's tp > 1): this rank's heads and MLP
// features (the rank's layout, transformer_layout(shape, tp, rank)), the
// partial sums crossing the tensor group through DeviceTensorGroup where
// transformer.cpp calls its TensorGroup (Megatron's f and g; all-gather and
// reduce-scatter under sequence parallelism, the block's row work then on this
// rank's s / tp positions). Recomputation as transformer.cpp's: full keeps
// each block's input only (one block's activations are allocated, reused by
// every block and by the recomputed forward), selective drops the attention
// probabilities (one block's worth, recomputed in backward).
// bf16/fp16 as the host path rounds them: every operation's output rounded
// to the format where transformer.cpp rounds it, each GEMM on 16-bit copies
// of its operands (the unit's weights converted as the unit starts; an
// activation's copy made where it is produced and kept with it), fp32
// accumulation; the tensor group's collectives carry the format. Every
// activation is allocated once, for micro-batches of up to `batch` sequences.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ccscope/training_probe/transformer.h"
#include "device_ops.h"

namespace ccscope::training_probe::device {

// transformer.h's TensorGroup over device memory: each call is queued after
// the compute stream's work so far, and the compute stream's later work waits
// for it. Every rank of the group calls them in the same order; chunks are
// equal and in rank order.
class DeviceTensorGroup {
 public:
  virtual ~DeviceTensorGroup() = default;
  virtual void all_reduce(float* values, size_t n) = 0;  // sum, in place
  // Every rank's `mine` (n_mine values) into `full`, in rank order.
  virtual void all_gather(const float* mine, float* full, size_t n_mine) = 0;
  // The sum of every rank's `full`, this rank's n_mine-value chunk into `mine`.
  virtual void reduce_scatter(const float* full, float* mine, size_t n_mine) = 0;
};

class DeviceTransformer {
 public:
  // `group`: the tensor group (may be null when parallel.tp is 1).
  DeviceTransformer(DeviceAllocator& allocator, const TransformerShape& shape,
                    const TransformerLayout& layout, const TransformerParallel& parallel,
                    Precision precision, DeviceTensorGroup* group, size_t batch);

  // As Transformer::train_micro_batch: `batch` sequences of seq_len + 1
  // tokens; gradients accumulated (+=) into hooks.gradients(unit), times
  // grad_scale; returns the micro-batch's share of the loss (the sum of its
  // tokens' cross-entropies / (batch_total x seq_len)). Synchronizes the
  // stream (the loss comes back to the host).
  double micro_batch(const Context& c, std::span<const uint32_t> sequences, size_t batch,
                     size_t batch_total, float grad_scale, UnitHooks& hooks);
  // The activation elements the blocks hold for backward at the forward's end
  // (Transformer's `held`).
  size_t held() const { return held_; }

 private:
  struct Block {  // what one block keeps for backward (transformer.cpp's BlockCache)
    DeviceBuffer<float> mean1, rstd1, a, qkv, attn, x1, mean2, rstd2, c, h1, g;
    DeviceBuffer<uint16_t> a16, qkv16, attn16, c16, g16;  // the GEMMs' operands (bf16/fp16)
  };
  // A GEMM operand: the values, or their 16-bit copy in bf16/fp16.
  const void* operand(const float* values, const uint16_t* words) const {
    return mixed_ ? static_cast<const void*>(words) : static_cast<const void*>(values);
  }
  // `words` = the 16-bit copy of `values` (bf16/fp16; nothing in fp32).
  void copy_16(const Context& c, const float* values, uint16_t* words, size_t n) const;
  // The unit's parameters' 16-bit copy (p16_), for its GEMMs.
  void unit_words(const Context& c, const float* p, size_t unit);
  // Block i's cache: its own, or under full recomputation the one all share.
  Block& cache(size_t i) { return blocks_[full_recompute() ? 0 : i]; }
  bool full_recompute() const { return p_.recompute == Recompute::kFull; }
  bool selective_recompute() const { return p_.recompute == Recompute::kSelective; }
  // The tensor group's operators: this rank's rows to every row (sequence
  // parallel; else a copy only where the buffers differ), and partial sums
  // summed to this rank's rows (or every row).
  const float* gather_rows(const float* mine, float* full, size_t cols);
  const float* reduce_rows(float* partial, float* mine, size_t cols);
  size_t probs_index(size_t i) const { return p_.recompute != Recompute::kNone ? 0 : i; }
  float* probs(size_t i) { return probs_[probs_index(i)].data(); }
  uint16_t* probs16(size_t i) { return probs16_[probs_index(i)].data(); }
  void attention_probs(const Context& c, const Block& k, float* probs, uint16_t* probs16);
  void block_forward(const Context& c, const float* p, size_t i, float* out);
  void block_backward(const Context& c, const float* p, float* g, size_t i, const float* dout,
                      float* dx);

  TransformerShape s_;
  TransformerLayout l_;
  TransformerParallel p_;
  Precision precision_;
  bool mixed_;
  DeviceTensorGroup* group_;
  size_t heads_, hl_, fl_;  // this rank's heads, their width, its MLP features
  bool sp_;
  size_t capacity_;  // sequences a micro-batch may hold
  size_t b_ = 0, rows_full_ = 0, rows_ = 0, row0_ = 0;
  size_t held_ = 0;
  // The blocks' inputs (this rank's rows); x_[layers] the last block's output.
  std::vector<DeviceBuffer<float>> x_;
  std::vector<Block> blocks_;
  std::vector<DeviceBuffer<float>> probs_;  // per block, or one (recomputed)
  DeviceBuffer<float> recomputed_;          // full recomputation's block output (discarded)
  DeviceBuffer<float> xf_, y_, mean_f_, rstd_f_, logits_, dlogits_;  // the final norm and head
  DeviceBuffer<double> row_loss_;
  DeviceBuffer<float> mine_, proj_, proj_mine_, dp_, d_head_, dxf_, dout_, dx_, dfull_, dg_, dc_,
      dx1_, dattn_, dqkv_, da_;
  std::vector<DeviceBuffer<uint16_t>> probs16_;
  DeviceBuffer<uint16_t> p16_, y16_, dy16_, dattn16_, dp16_;  // bf16/fp16 operands and scratch
  DeviceBuffer<uint32_t> token_, target_;
  std::vector<uint32_t> token_host_, target_host_;  // read by the stream until it synchronizes
  std::vector<double> row_loss_host_;
};

}  // namespace ccscope::training_probe::device

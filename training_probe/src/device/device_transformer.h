#pragma once
// The transformer (ccscope/training_probe/transformer.h) on a GPU for the
// data-parallel strategies: transformer.cpp's forward and backward of one
// micro-batch with activations in device memory, its GEMMs through cuBLAS
// (attention's per sample and head), the rest as kernels.cuh's kernels in the
// host's operation order. Parameters and gradients are where the strategy's
// UnitHooks say (device pointers), unit by unit as the host model asks for
// them, so DDP's buckets and ZeRO's shards and gathers apply unchanged.
// fp32 only (tp = 1, no recomputation); every activation is allocated once,
// for micro-batches of up to `batch` sequences.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ccscope/training_probe/transformer.h"
#include "device_ops.h"

namespace ccscope::training_probe::device {

class DeviceTransformer {
 public:
  DeviceTransformer(DeviceAllocator& allocator, const TransformerShape& shape,
                    const TransformerLayout& layout, size_t batch);

  // As Transformer::train_micro_batch: `batch` sequences of seq_len + 1
  // tokens; gradients accumulated (+=) into hooks.gradients(unit), times
  // grad_scale; returns the micro-batch's share of the loss (the sum of its
  // tokens' cross-entropies / (batch_total x seq_len)). Synchronizes the
  // stream at its end (the loss comes back to the host).
  double micro_batch(const Context& c, std::span<const uint32_t> sequences, size_t batch,
                     size_t batch_total, float grad_scale, UnitHooks& hooks);
  // The activation elements the blocks hold for backward at the forward's end
  // (Transformer's `held`).
  size_t held() const { return held_; }

 private:
  struct Block {  // what one block keeps for backward (transformer.cpp's BlockCache)
    DeviceBuffer<float> mean1, rstd1, a, qkv, probs, attn, x1, mean2, rstd2, c, h1, g;
  };
  void block_forward(const Context& c, const float* p, size_t i);
  void block_backward(const Context& c, const float* p, float* g, size_t i, const float* dout,
                      float* dx);

  TransformerShape s_;
  TransformerLayout l_;
  size_t capacity_;  // sequences a micro-batch may hold
  size_t b_ = 0, rows_ = 0;
  size_t held_ = 0;
  std::vector<DeviceBuffer<float>> x_;  // the blocks' inputs; x_[layers] the last output
  std::vector<Block> blocks_;
  DeviceBuffer<float> y_, mean_f_, rstd_f_, logits_, dlogits_;  // the final norm and head
  DeviceBuffer<double> row_loss_;
  DeviceBuffer<float> proj_, dp_, d_head_, dout_, dx_, dg_, dc_, dx1_, dattn_, dqkv_, da_;
  DeviceBuffer<uint32_t> token_, target_;
  std::vector<uint32_t> token_host_, target_host_;  // read by the stream until it synchronizes
  std::vector<double> row_loss_host_;
};

}  // namespace ccscope::training_probe::device

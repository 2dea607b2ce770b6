#pragma once
// The probe's transformer (`ccscope train --model transformer`): a GPT-style
// decoder over a small vocabulary of synthetic tokens, forward and backward
// written by hand over OpenBLAS, with Megatron-LM's tensor parallelism,
// sequence parallelism and activation recomputation.
//
//   token embedding + learned position embedding
//   `layers` pre-LayerNorm blocks:
//     x = x + proj(attention(ln1(x)))        causal multi-head self-attention
//     x = x + fc2(gelu(fc1(ln2(x))))         GELU exact (erf), as nn.GELU()
//   final layer norm, LM head (its own weight, not tied to the embedding),
//   cross-entropy over the vocabulary, the mean over every token.
//
// Parameters live in one flat float vector in this order (PyTorch names of
// training_probe/scripts/pytorch_transformer.py; Linear weights [out x in]
// row-major as nn.Linear stores them):
//   tok_emb [V x h], pos_emb [S x h],
//   per block: ln1.w [h], ln1.b [h], qkv.w [3h x h] (rows: Q, then K, then V,
//     each head's d = h / heads rows together), qkv.b [3h], proj.w [h x h],
//     proj.b [h], ln2.w [h], ln2.b [h], fc1.w [f x h], fc1.b [f],
//     fc2.w [h x f], fc2.b [h],
//   lnf.w [h], lnf.b [h], head.w [V x h].
// Units (what DDP buckets and ZeRO-3 gathers treat as layers) are ranges of
// it: the embeddings, each block, the final norm and head.
//
// Tensor parallel (tp ranks): each rank holds heads / tp heads' Q, K and V
// rows and bias (column-parallel), the matching columns of proj.w
// (row-parallel), f / tp rows of fc1 and columns of fc2; everything else is
// replicated. A rank's vector has the same order with those shapes. Forward
// all-reduces the row-parallel outputs (Megatron's g), backward the
// column-parallel inputs' gradients (f): 4 all-reduces of s x b x h per block
// per micro-batch. Sequence parallel replaces them with all-gathers before the
// column-parallel GEMMs and reduce-scatters after the row-parallel ones, the
// layer norms, residuals and biases running on the rank's s / tp positions;
// the embeddings, layer norms and row-parallel biases then hold partial
// gradients, summed over the tensor group once per step (Megatron's
// layer-norm gradient all-reduce). Activations are [s x b x h] (Megatron's
// order), so a sequence shard is contiguous rows.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ccscope/training_probe/layout.h"
#include "ccscope/training_probe/model.h"

namespace ccscope::training_probe {

struct TransformerShape {
  size_t vocab = 64;
  size_t seq_len = 32;
  size_t hidden = 64;
  size_t heads = 4;
  size_t layers = 2;
  size_t ffn = 0;  // 0: 4 x hidden
  size_t ffn_size() const { return ffn ? ffn : 4 * hidden; }
  size_t head_dim() const { return hidden / heads; }
};

// How one rank runs the model (recomputation: model.h's Recompute, per block).
struct TransformerParallel {
  size_t tp = 1;
  size_t rank = 0;  // in the tensor group
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
};

// Why a shape cannot run over `tp` ranks ("" when it can).
std::string transformer_problem(const TransformerShape& shape, size_t tp, bool sequence_parallel);

// Offsets of one block's parameters from the block's start, in a rank's shapes.
struct BlockLayout {
  size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
  size_t size;
  size_t heads;  // this rank's
  size_t ffn;    // this rank's fc1 rows
};
struct TransformerLayout {
  size_t tok_emb = 0, pos_emb = 0;
  std::vector<size_t> blocks;  // each block's start
  BlockLayout block{};
  size_t lnf_w = 0, lnf_b = 0, head = 0;
  size_t total = 0;
  std::vector<Range> units;  // embeddings, blocks..., final norm + head
};
TransformerLayout transformer_layout(const TransformerShape& shape, size_t tp = 1, size_t rank = 0);
size_t transformer_parameter_count(const TransformerShape& shape);
// The units as LayerSlices (weight = the whole unit, no bias), for the engine's buckets and shards.
std::vector<LayerSlice> transformer_slices(const TransformerShape& shape);

// Initial values from `seed` (a stream of their own): Linear weights and
// biases U(-1/sqrt(in), 1/sqrt(in)) as nn.Linear, embeddings U(-1, 1), layer
// norms weight 1, bias 0.
std::vector<float> transformer_initial_parameters(const TransformerShape& shape, uint64_t seed);

// Tensor-parallel rank `rank`'s part of a full vector (parameters or
// gradients) in that rank's layout.
std::vector<float> transformer_shard(const TransformerShape& shape, std::span<const float> full,
                                     size_t tp, size_t rank);
// The full vector from every tensor-parallel rank's (`ranks`: rank 0's
// vector, then rank 1's, ..., each in its layout): transformer_shard's
// inverse, a replicated element taken from rank 0.
std::vector<float> transformer_unshard(const TransformerShape& shape, std::span<const float> ranks,
                                       size_t tp);
// 1 for each element of a rank's vector that it alone holds (its shard of a
// split matrix), 0 for replicated ones unless `rank` is 0: weights of the
// squares in the global gradient norm.
std::vector<float> transformer_unique(const TransformerShape& shape, size_t tp, size_t rank);
// The ranges of a rank's vector whose gradients are partial under sequence
// parallelism (embeddings, layer norms, row-parallel biases): summed over the
// tensor group after backward.
std::vector<Range> sequence_parallel_partial(const TransformerShape& shape, size_t tp);

// The synthetic data: sequences of seq_len + 1 tokens (inputs, and the same
// shifted by one as targets) from a deterministic teacher: two start tokens
// drawn from `seed`, then t[i+1] = perm[(t[i] + t[i-1]) mod V] with a fixed
// random permutation perm of the vocabulary, so the loss can fall from
// ln V towards 0.
struct TokenDataset {
  size_t samples = 0;
  size_t length = 0;             // seq_len + 1
  std::vector<uint32_t> tokens;  // [samples x length]
  std::span<const uint32_t> sequence(size_t sample) const {
    return {tokens.data() + sample * length, length};
  }
};
TokenDataset make_token_dataset(size_t samples, const TransformerShape& shape, uint64_t seed);
// The sequences of `indices`, one after another.
std::vector<uint32_t> gather_sequences(const TokenDataset& data, std::span<const size_t> indices);

// Where the model reads a unit's parameters and writes its gradients (the
// strategy's: gathered, sharded, staged), called in unit order forward and in
// reverse order backward, as the MLP's LayerHooks.
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual const float* forward_parameters(size_t unit) = 0;
  virtual void after_forward(size_t /*unit*/) {}
  virtual const float* backward_parameters(size_t unit) = 0;
  virtual float* gradients(size_t unit) = 0;  // accumulated into (+=)
  virtual void after_backward(size_t /*unit*/) {}
};

// Parameters and gradients in one vector (the single-rank and tensor-parallel case).
class FlatUnits final : public UnitHooks {
 public:
  FlatUnits(const TransformerLayout& layout, const float* parameters, float* gradients)
      : layout_(layout), parameters_(parameters), gradients_(gradients) {}
  const float* forward_parameters(size_t unit) override {
    return parameters_ + layout_.units[unit].begin;
  }
  const float* backward_parameters(size_t unit) override { return forward_parameters(unit); }
  float* gradients(size_t unit) override { return gradients_ + layout_.units[unit].begin; }

 private:
  const TransformerLayout& layout_;
  const float* parameters_;
  float* gradients_;
};

// The tensor group's collectives on activations (every rank calls them in the
// same order). Chunks are equal and in rank order.
class TensorGroup {
 public:
  virtual ~TensorGroup() = default;
  virtual void all_reduce(std::vector<float>& values) = 0;  // sum, in place
  // Every rank's `mine` concatenated into `full` (resized).
  virtual void all_gather(std::span<const float> mine, std::vector<float>& full) = 0;
  // The sum of every rank's `full`, this rank's chunk into `mine` (resized).
  virtual void reduce_scatter(std::span<const float> full, std::vector<float>& mine) = 0;
};

class Transformer {
 public:
  Transformer(TransformerShape shape, Precision precision, TransformerParallel parallel = {});
  const TransformerShape& shape() const { return shape_; }
  const TransformerLayout& layout() const { return layout_; }
  const TransformerParallel& parallel() const { return parallel_; }

  // One micro-batch of `batch` sequences (gather_sequences' rows): forward,
  // the loss, backward into the hooks' gradients (times `grad_scale`, fp16's
  // loss scale). Returns this micro-batch's share of the loss: the sum of its
  // tokens' cross-entropies / (batch_total x seq_len). `group` may be null
  // when tp is 1.
  // `held` (optional): the activation elements the blocks held for backward
  // at the end of the forward (what recomputation saves).
  double train_micro_batch(std::span<const uint32_t> sequences, size_t batch, size_t batch_total,
                           float grad_scale, UnitHooks& hooks, TensorGroup* group,
                           size_t* held = nullptr) const;

 private:
  TransformerShape shape_;
  Precision precision_;
  TransformerParallel parallel_;
  TransformerLayout layout_;
};

// The same arithmetic in float64 on one rank (no rounding): the loss of
// `sequences` and its gradient, for the finite-difference tests.
double transformer_loss_and_gradients_f64(const TransformerShape& shape,
                                          std::span<const double> parameters,
                                          std::span<const uint32_t> sequences, size_t batch,
                                          std::vector<double>& gradients);

}  // namespace ccscope::training_probe

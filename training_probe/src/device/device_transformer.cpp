#include "device_transformer.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

namespace ccscope::training_probe::device {
namespace {
void copy_rows(const Context& c, float* to, const float* from, size_t n) {
  check(cudaMemcpyAsync(to, from, n * sizeof(float), cudaMemcpyDeviceToDevice, c.stream),
        "cudaMemcpyAsync device to device");
}
}  // namespace

DeviceTransformer::DeviceTransformer(DeviceAllocator& allocator, const TransformerShape& shape,
                                     const TransformerLayout& layout,
                                     const TransformerParallel& parallel, Precision precision,
                                     DeviceTensorGroup* group, size_t batch)
    : s_(shape),
      l_(layout),
      p_(parallel),
      precision_(precision),
      mixed_(precision != Precision::kFloat32),
      group_(group),
      heads_(layout.block.heads),
      hl_(layout.block.heads * shape.head_dim()),
      fl_(layout.block.ffn),
      sp_(parallel.sequence_parallel && parallel.tp > 1),
      capacity_(batch) {
  if (parallel.tp > 1 && group == nullptr)
    throw std::logic_error("DeviceTransformer: a tensor-parallel transformer without a group");
  const size_t full = shape.seq_len * batch, mine = sp_ ? full / parallel.tp : full;
  const size_t h = shape.hidden, scores = batch * heads_ * shape.seq_len * shape.seq_len;
  auto buffer = [&allocator](size_t n) { return DeviceBuffer<float>(allocator, n); };
  auto words = [&allocator, this](size_t n) {
    return DeviceBuffer<uint16_t>(allocator, mixed_ ? n : 0);
  };
  for (size_t i = 0; i <= shape.layers; ++i) x_.push_back(buffer(mine * h));
  // Full recomputation keeps one block's activations, for the block being recomputed.
  for (size_t i = 0; i < (full_recompute() ? 1 : shape.layers); ++i) {
    Block k;
    k.mean1 = buffer(mine);
    k.rstd1 = buffer(mine);
    k.a = buffer(full * h);
    k.qkv = buffer(full * 3 * hl_);
    k.attn = buffer(full * hl_);
    k.x1 = buffer(mine * h);
    k.mean2 = buffer(mine);
    k.rstd2 = buffer(mine);
    k.c = buffer(full * h);
    k.h1 = buffer(full * fl_);
    k.g = buffer(full * fl_);
    k.a16 = words(full * h);
    k.qkv16 = words(full * 3 * hl_);
    k.attn16 = words(full * hl_);
    k.c16 = words(full * h);
    k.g16 = words(full * fl_);
    blocks_.push_back(std::move(k));
  }
  for (size_t i = 0; i < (parallel.recompute != Recompute::kNone ? 1 : shape.layers); ++i) {
    probs_.push_back(buffer(scores));
    probs16_.push_back(words(scores));
  }
  size_t largest_unit = 0;
  for (const Range& u : layout.units) largest_unit = std::max(largest_unit, u.size());
  p16_ = words(largest_unit);
  y16_ = words(full * h);
  dy16_ = words(full * std::max({shape.vocab, 3 * hl_, fl_, h}));
  dattn16_ = words(full * hl_);
  dp16_ = words(scores);
  recomputed_ = buffer(full_recompute() ? mine * h : 0);
  xf_ = buffer(sp_ ? full * h : 0);
  y_ = buffer(full * h);
  mean_f_ = buffer(full);
  rstd_f_ = buffer(full);
  logits_ = buffer(full * shape.vocab);
  dlogits_ = buffer(full * shape.vocab);
  row_loss_ = DeviceBuffer<double>(allocator, full);
  for (DeviceBuffer<float>* d : {&mine_, &proj_mine_, &dxf_, &dfull_})
    *d = buffer(sp_ ? (d == &mine_ || d == &proj_mine_ ? mine : full) * h : 0);
  for (DeviceBuffer<float>* d : {&proj_, &d_head_, &dc_, &da_}) *d = buffer(full * h);
  for (DeviceBuffer<float>* d : {&dout_, &dx_, &dx1_}) *d = buffer(mine * h);
  dp_ = buffer(scores);
  dg_ = buffer(full * fl_);
  dattn_ = buffer(full * hl_);
  dqkv_ = buffer(full * 3 * hl_);
  token_ = DeviceBuffer<uint32_t>(allocator, full);
  target_ = DeviceBuffer<uint32_t>(allocator, full);
}

const float* DeviceTransformer::gather_rows(const float* mine, float* full, size_t cols) {
  if (!sp_) return mine;
  group_->all_gather(mine, full, rows_ * cols);
  return full;
}

const float* DeviceTransformer::reduce_rows(float* partial, float* mine, size_t cols) {
  if (p_.tp == 1) return partial;
  if (!sp_) {
    group_->all_reduce(partial, rows_full_ * cols);
    return partial;
  }
  group_->reduce_scatter(partial, mine, rows_ * cols);
  return mine;
}

void DeviceTransformer::copy_16(const Context& c, const float* values, uint16_t* words,
                                size_t n) const {
  if (mixed_) to_16(c, precision_, values, words, n);
}

void DeviceTransformer::unit_words(const Context& c, const float* p, size_t unit) {
  copy_16(c, p, p16_.data(), l_.units[unit].size());
}

double DeviceTransformer::micro_batch(const Context& c, std::span<const uint32_t> sequences,
                                      size_t batch, size_t batch_total, float grad_scale,
                                      UnitHooks& hooks) {
  const Precision pr = precision_;
  const size_t S = s_.seq_len, h = s_.hidden, V = s_.vocab;
  if (batch > capacity_ || sequences.size() != batch * (S + 1))
    throw std::invalid_argument("DeviceTransformer::micro_batch: sequences of the wrong size");
  b_ = batch;
  rows_full_ = S * batch;
  rows_ = sp_ ? rows_full_ / p_.tp : rows_full_;
  row0_ = sp_ ? p_.rank * rows_ : 0;
  // Row r = position r / batch of sample r % batch: its input token and target.
  token_host_.resize(rows_full_);
  target_host_.resize(rows_full_);
  for (size_t r = 0; r < rows_full_; ++r) {
    const uint32_t* seq = sequences.data() + (r % b_) * (S + 1);
    token_host_[r] = seq[r / b_];
    target_host_[r] = seq[r / b_ + 1];
  }
  token_.upload(token_host_, c.stream);
  target_.upload(target_host_, c.stream);
  // This rank's rows start at a whole position (seq_len splits over the group).
  const size_t first_position = row0_ / b_;

  // Forward.
  const float* p0 = hooks.forward_parameters(0);
  embed(c, pr, p0 + l_.tok_emb, p0 + l_.pos_emb + first_position * h, token_.data() + row0_,
        x_[0].data(), rows_, h, b_);
  hooks.after_forward(0);
  for (size_t i = 0; i < s_.layers; ++i) {
    block_forward(c, hooks.forward_parameters(1 + i), i, x_[i + 1].data());
    hooks.after_forward(1 + i);
  }
  // As transformer.cpp counts them: per block x, x1 (this rank's rows x h),
  // the four row statistics (its rows), a, c (every row x h), qkv (3 hl), attn
  // (hl), h1 and g (f / tp), the probabilities; recomputation keeps less.
  const size_t R = rows_full_, Rl = rows_, scores = b_ * heads_ * S * S;
  const size_t block_held = full_recompute()
                                ? Rl * h
                                : 2 * Rl * h + 4 * Rl + 2 * R * h + 4 * R * hl_ + 2 * R * fl_ +
                                      (selective_recompute() ? 0 : scores);
  held_ = s_.layers * block_held;
  // The final norm, the head and the loss on every row (every rank); its backward.
  const size_t head_unit = s_.layers + 1, head_w = l_.head - l_.lnf_w;
  const float* x_last = gather_rows(x_[s_.layers].data(), xf_.data(), h);
  const float* p = hooks.forward_parameters(head_unit);
  unit_words(c, p, head_unit);
  layer_norm(c, pr, x_last, p, p + h, y_.data(), mean_f_.data(), rstd_f_.data(), R, h);
  copy_16(c, y_.data(), y16_.data(), R * h);
  linear_forward(c, pr, operand(y_.data(), y16_.data()), operand(p + head_w, p16_.data() + head_w),
                 logits_.data(), R, h, V);
  round_to(c, pr, logits_.data(), R * V);
  hooks.after_forward(head_unit);
  const double denominator = static_cast<double>(batch_total) * static_cast<double>(S);
  const float factor = static_cast<float>(static_cast<double>(grad_scale) / denominator);
  cross_entropy(c, pr, logits_.data(), target_.data(), row_loss_.data(), dlogits_.data(), R, V,
                factor);
  row_loss_host_.resize(R);
  row_loss_.download(row_loss_host_, c.stream);
  const float* pb = hooks.backward_parameters(head_unit);
  float* g = hooks.gradients(head_unit);
  unit_words(c, pb, head_unit);
  linear_backward(c, pr, operand(y_.data(), y16_.data()), dlogits_.data(), dy16_.data(),
                  operand(pb + head_w, p16_.data() + head_w), g + head_w, nullptr, d_head_.data(),
                  R, h, V);
  // Under sequence parallelism every row's input gradient, of which this rank's rows go on.
  layer_norm_backward(c, pr, x_last, mean_f_.data(), rstd_f_.data(), d_head_.data(), pb, g, g + h,
                      nullptr, sp_ ? dxf_.data() : dout_.data(), R, h);
  round_to(c, pr, g, l_.units[head_unit].size());  // the host rounds the unit's sums
  if (sp_) copy_rows(c, dout_.data(), dxf_.data() + row0_ * h, Rl * h);
  hooks.after_backward(head_unit);
  // The blocks' backward (a recomputed forward first), then the embeddings'.
  for (size_t i = s_.layers; i-- > 0;) {
    const float* pi = hooks.backward_parameters(1 + i);
    if (full_recompute()) block_forward(c, pi, i, recomputed_.data());
    block_backward(c, pi, hooks.gradients(1 + i), i, dout_.data(), dx_.data());
    std::swap(dout_, dx_);
    hooks.after_backward(1 + i);
  }
  (void)hooks.backward_parameters(0);  // none read; ZeRO-3 still gathers it, as FSDP does
  float* g0 = hooks.gradients(0);
  embed_backward(c, dout_.data(), token_.data() + row0_, g0 + l_.tok_emb,
                 g0 + l_.pos_emb + first_position * h, Rl, h, b_, V);
  round_to(c, pr, g0, l_.units[0].size());  // the host rounds the unit's sums
  hooks.after_backward(0);
  check(cudaStreamSynchronize(c.stream), "cudaStreamSynchronize (the transformer's loss)");
  double loss = 0;  // in row order, as the host sums it
  for (double v : row_loss_host_) loss += v;
  return loss / denominator;
}

// softmax(Q K^T / sqrt(d), causal) per sample n and head j into `out` (and
// its 16-bit copy): sample n's rows are every b-th, so its matrices have the
// row stride b x 3 hl.
void DeviceTransformer::attention_probs(const Context& c, const Block& k, float* out,
                                        uint16_t* out16) {
  const size_t S = s_.seq_len, d = s_.head_dim(), ld = b_ * 3 * hl_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (size_t n = 0; n < b_; ++n)
    for (size_t j = 0; j < heads_; ++j) {
      const size_t off = n * 3 * hl_ + j * d;
      gemm_rows(c, precision_, false, true, S, S, d, scale,
                operand(k.qkv.data() + off, k.qkv16.data() + off), ld,
                operand(k.qkv.data() + off + hl_, k.qkv16.data() + off + hl_), ld, 0.0f,
                out + (n * heads_ + j) * S * S, S);
    }
  causal_softmax(c, precision_, out, b_ * heads_, S);
  copy_16(c, out, out16, b_ * heads_ * S * S);
}

void DeviceTransformer::block_forward(const Context& c, const float* p, size_t i, float* out) {
  const BlockLayout& L = l_.block;
  const Precision pr = precision_;
  Block& k = cache(i);
  const size_t S = s_.seq_len, h = s_.hidden, d = s_.head_dim(), R = rows_full_, Rl = rows_;
  const size_t ld = b_ * 3 * hl_;
  const uint16_t* w = p16_.data();
  unit_words(c, p, 1 + i);
  const float* x = x_[i].data();
  // ln1 on this rank's rows (into the gathered buffer directly when they are all the rows).
  layer_norm(c, pr, x, p + L.ln1_w, p + L.ln1_b, sp_ ? mine_.data() : k.a.data(), k.mean1.data(),
             k.rstd1.data(), Rl, h);
  gather_rows(mine_.data(), k.a.data(), h);
  copy_16(c, k.a.data(), k.a16.data(), R * h);
  linear_forward(c, pr, operand(k.a.data(), k.a16.data()), operand(p + L.qkv_w, w + L.qkv_w),
                 k.qkv.data(), R, h, 3 * hl_);
  bias_activation(c, pr, std::nullopt, k.qkv.data(), p + L.qkv_b, k.qkv.data(),
                  mixed_ ? k.qkv16.data() : nullptr, R, 3 * hl_);
  float* probs_i = probs(i);
  const uint16_t* probs16_i = probs16(i);
  attention_probs(c, k, probs_i, probs16(i));
  for (size_t n = 0; n < b_; ++n)
    for (size_t j = 0; j < heads_; ++j) {
      const size_t v = n * 3 * hl_ + 2 * hl_ + j * d, at = (n * heads_ + j) * S * S;
      gemm_rows(c, pr, false, false, S, d, S, 1.0f, operand(probs_i + at, probs16_i + at), S,
                operand(k.qkv.data() + v, k.qkv16.data() + v), ld, 0.0f,
                k.attn.data() + n * hl_ + j * d, b_ * hl_);
    }
  copy_16(c, k.attn.data(), k.attn16.data(), R * hl_);  // rounded: the GEMMs read only the copy
  // The row-parallel proj: partial sums reduced (Megatron's g), its bias once, the residual.
  linear_forward(c, pr, operand(k.attn.data(), k.attn16.data()),
                 operand(p + L.proj_w, w + L.proj_w), proj_.data(), R, hl_, h);
  round_to(c, pr, proj_.data(), R * h);
  const float* attn_out = reduce_rows(proj_.data(), proj_mine_.data(), h);
  bias_residual(c, pr, x, attn_out, p + L.proj_b, k.x1.data(), Rl, h);
  layer_norm(c, pr, k.x1.data(), p + L.ln2_w, p + L.ln2_b, sp_ ? mine_.data() : k.c.data(),
             k.mean2.data(), k.rstd2.data(), Rl, h);
  gather_rows(mine_.data(), k.c.data(), h);
  copy_16(c, k.c.data(), k.c16.data(), R * h);
  linear_forward(c, pr, operand(k.c.data(), k.c16.data()), operand(p + L.fc1_w, w + L.fc1_w),
                 k.h1.data(), R, h, fl_);
  bias_activation(c, pr, std::nullopt, k.h1.data(), p + L.fc1_b, k.h1.data(), nullptr, R, fl_);
  gelu(c, pr, k.h1.data(), k.g.data(), R * fl_);
  copy_16(c, k.g.data(), k.g16.data(), R * fl_);
  linear_forward(c, pr, operand(k.g.data(), k.g16.data()), operand(p + L.fc2_w, w + L.fc2_w),
                 proj_.data(), R, fl_, h);
  round_to(c, pr, proj_.data(), R * h);
  const float* mlp_out = reduce_rows(proj_.data(), proj_mine_.data(), h);
  bias_residual(c, pr, k.x1.data(), mlp_out, p + L.fc2_b, out, Rl, h);
}

void DeviceTransformer::block_backward(const Context& c, const float* p, float* g, size_t i,
                                       const float* dout, float* dx) {
  const BlockLayout& L = l_.block;
  const Precision pr = precision_;
  const Block& k = cache(i);
  const size_t S = s_.seq_len, h = s_.hidden, d = s_.head_dim(), R = rows_full_, Rl = rows_;
  const size_t ld = b_ * 3 * hl_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const uint16_t* w = p16_.data();
  unit_words(c, p, 1 + i);
  float* probs_i = probs(i);
  const uint16_t* probs16_i = probs16(i);
  if (selective_recompute()) attention_probs(c, k, probs_i, probs16(i));
  // The MLP: out = x1 + fc2(gelu(fc1(ln2(x1)))) + fc2.b; the bias's gradient
  // from this rank's rows, the GEMMs' from every row.
  bias_grad(c, pr, dout, g + L.fc2_b, Rl, h);
  const float* dm = gather_rows(dout, dfull_.data(), h);
  linear_backward(c, pr, operand(k.g.data(), k.g16.data()), dm, dy16_.data(),
                  operand(p + L.fc2_w, w + L.fc2_w), g + L.fc2_w, nullptr, dg_.data(), R, fl_, h);
  gelu_backward(c, pr, dg_.data(), k.h1.data(), R * fl_);
  linear_backward(c, pr, operand(k.c.data(), k.c16.data()), dg_.data(), dy16_.data(),
                  operand(p + L.fc1_w, w + L.fc1_w), g + L.fc1_w, g + L.fc1_b, dc_.data(), R, h,
                  fl_);
  // The column-parallel input's gradient reduced (Megatron's f).
  const float* dc = reduce_rows(dc_.data(), mine_.data(), h);
  layer_norm_backward(c, pr, k.x1.data(), k.mean2.data(), k.rstd2.data(), dc, p + L.ln2_w,
                      g + L.ln2_w, g + L.ln2_b, dout, dx1_.data(), Rl, h);
  // Attention: x1 = x + proj(attention(ln1(x))) + proj.b.
  bias_grad(c, pr, dx1_.data(), g + L.proj_b, Rl, h);
  const float* dproj = gather_rows(dx1_.data(), dfull_.data(), h);
  linear_backward(c, pr, operand(k.attn.data(), k.attn16.data()), dproj, dy16_.data(),
                  operand(p + L.proj_w, w + L.proj_w), g + L.proj_w, nullptr, dattn_.data(), R, hl_,
                  h);
  copy_16(c, dattn_.data(), dattn16_.data(), R * hl_);
  const float* qkv = k.qkv.data();
  const uint16_t* qkv16 = k.qkv16.data();
  for (size_t n = 0; n < b_; ++n)
    for (size_t j = 0; j < heads_; ++j) {
      const size_t off = n * 3 * hl_ + j * d, at = (n * heads_ + j) * S * S;
      const size_t o = n * hl_ + j * d;  // the head's output gradient
      // dP = dO V^T; dV = P^T dO.
      gemm_rows(c, pr, false, true, S, S, d, 1.0f, operand(dattn_.data() + o, dattn16_.data() + o),
                b_ * hl_, operand(qkv + off + 2 * hl_, qkv16 + off + 2 * hl_), ld, 0.0f,
                dp_.data() + at, S);
      gemm_rows(c, pr, true, false, S, d, S, 1.0f, operand(probs_i + at, probs16_i + at), S,
                operand(dattn_.data() + o, dattn16_.data() + o), b_ * hl_, 0.0f,
                dqkv_.data() + off + 2 * hl_, ld);
    }
  causal_softmax_backward(c, pr, probs_i, dp_.data(), b_ * heads_, S);
  copy_16(c, dp_.data(), dp16_.data(), b_ * heads_ * S * S);
  for (size_t n = 0; n < b_; ++n)
    for (size_t j = 0; j < heads_; ++j) {
      const size_t off = n * 3 * hl_ + j * d, at = (n * heads_ + j) * S * S;
      const void* ds = operand(dp_.data() + at, dp16_.data() + at);
      // dQ = dS K / sqrt(d); dK = dS^T Q / sqrt(d).
      gemm_rows(c, pr, false, false, S, d, S, scale, ds, S,
                operand(qkv + off + hl_, qkv16 + off + hl_), ld, 0.0f, dqkv_.data() + off, ld);
      gemm_rows(c, pr, true, false, S, d, S, scale, ds, S, operand(qkv + off, qkv16 + off), ld,
                0.0f, dqkv_.data() + off + hl_, ld);
    }
  round_to(c, pr, dqkv_.data(), R * 3 * hl_);
  linear_backward(c, pr, operand(k.a.data(), k.a16.data()), dqkv_.data(), dy16_.data(),
                  operand(p + L.qkv_w, w + L.qkv_w), g + L.qkv_w, g + L.qkv_b, da_.data(), R, h,
                  3 * hl_);
  const float* da = reduce_rows(da_.data(), mine_.data(), h);
  layer_norm_backward(c, pr, x_[i].data(), k.mean1.data(), k.rstd1.data(), da, p + L.ln1_w,
                      g + L.ln1_w, g + L.ln1_b, dx1_.data(), dx, Rl, h);
  round_to(c, pr, g, L.size);  // the layer norms' sums too, as the host rounds the unit
}

}  // namespace ccscope::training_probe::device

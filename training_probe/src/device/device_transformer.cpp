#include "device_transformer.h"

#include <cmath>
#include <optional>
#include <stdexcept>

namespace ccscope::training_probe::device {
namespace {
constexpr Precision kFp32 = Precision::kFloat32;
}  // namespace

DeviceTransformer::DeviceTransformer(DeviceAllocator& allocator, const TransformerShape& shape,
                                     const TransformerLayout& layout, size_t batch)
    : s_(shape), l_(layout), capacity_(batch) {
  if (layout.block.heads != shape.heads)
    throw std::logic_error("DeviceTransformer: tensor-parallel layouts are not built on the GPU");
  const size_t rows = shape.seq_len * batch, h = shape.hidden, f = shape.ffn_size();
  const size_t scores = batch * shape.heads * shape.seq_len * shape.seq_len;
  auto buffer = [&allocator](size_t n) { return DeviceBuffer<float>(allocator, n); };
  for (size_t i = 0; i <= shape.layers; ++i) x_.push_back(buffer(rows * h));
  for (size_t i = 0; i < shape.layers; ++i) {
    Block k;
    k.mean1 = buffer(rows);
    k.rstd1 = buffer(rows);
    k.a = buffer(rows * h);
    k.qkv = buffer(rows * 3 * h);
    k.probs = buffer(scores);
    k.attn = buffer(rows * h);
    k.x1 = buffer(rows * h);
    k.mean2 = buffer(rows);
    k.rstd2 = buffer(rows);
    k.c = buffer(rows * h);
    k.h1 = buffer(rows * f);
    k.g = buffer(rows * f);
    blocks_.push_back(std::move(k));
  }
  y_ = buffer(rows * h);
  mean_f_ = buffer(rows);
  rstd_f_ = buffer(rows);
  logits_ = buffer(rows * shape.vocab);
  dlogits_ = buffer(rows * shape.vocab);
  row_loss_ = DeviceBuffer<double>(allocator, rows);
  proj_ = buffer(rows * h);
  dp_ = buffer(scores);
  for (DeviceBuffer<float>* d : {&d_head_, &dout_, &dx_, &dc_, &dx1_, &dattn_, &da_})
    *d = buffer(rows * h);
  dg_ = buffer(rows * f);
  dqkv_ = buffer(rows * 3 * h);
  token_ = DeviceBuffer<uint32_t>(allocator, rows);
  target_ = DeviceBuffer<uint32_t>(allocator, rows);
}

double DeviceTransformer::micro_batch(const Context& c, std::span<const uint32_t> sequences,
                                      size_t batch, size_t batch_total, float grad_scale,
                                      UnitHooks& hooks) {
  const size_t S = s_.seq_len, h = s_.hidden, V = s_.vocab;
  if (batch > capacity_ || sequences.size() != batch * (S + 1))
    throw std::invalid_argument("DeviceTransformer::micro_batch: sequences of the wrong size");
  b_ = batch;
  rows_ = S * batch;
  // Row r = position r / batch of sample r % batch: its input token and target.
  token_host_.resize(rows_);
  target_host_.resize(rows_);
  for (size_t r = 0; r < rows_; ++r) {
    const uint32_t* seq = sequences.data() + (r % b_) * (S + 1);
    token_host_[r] = seq[r / b_];
    target_host_[r] = seq[r / b_ + 1];
  }
  token_.upload(token_host_, c.stream);
  target_.upload(target_host_, c.stream);

  // Forward.
  const float* p0 = hooks.forward_parameters(0);
  embed(c, kFp32, p0 + l_.tok_emb, p0 + l_.pos_emb, token_.data(), x_[0].data(), rows_, h, b_);
  hooks.after_forward(0);
  for (size_t i = 0; i < s_.layers; ++i) {
    block_forward(c, hooks.forward_parameters(1 + i), i);
    hooks.after_forward(1 + i);
  }
  // As transformer.cpp counts them: per block x, a, attn, x1, c (rows x h),
  // qkv (3h), h1 and g (f), the four row statistics and the probabilities.
  const size_t f = s_.ffn_size();
  held_ = s_.layers * (rows_ * (5 * h + 3 * h + 2 * f + 4) + b_ * s_.heads * S * S);
  // The final norm, the head and the loss; its backward.
  const size_t head_unit = s_.layers + 1, head_w = l_.head - l_.lnf_w;
  const float* x_last = x_[s_.layers].data();
  const float* p = hooks.forward_parameters(head_unit);
  layer_norm(c, kFp32, x_last, p, p + h, y_.data(), mean_f_.data(), rstd_f_.data(), rows_, h);
  linear_forward(c, kFp32, y_.data(), p + head_w, logits_.data(), rows_, h, V);
  hooks.after_forward(head_unit);
  const double denominator = static_cast<double>(batch_total) * static_cast<double>(S);
  const float factor = static_cast<float>(static_cast<double>(grad_scale) / denominator);
  cross_entropy(c, kFp32, logits_.data(), target_.data(), row_loss_.data(), dlogits_.data(), rows_,
                V, factor);
  row_loss_host_.resize(rows_);
  row_loss_.download(row_loss_host_, c.stream);
  const float* pb = hooks.backward_parameters(head_unit);
  float* g = hooks.gradients(head_unit);
  linear_backward(c, kFp32, y_.data(), dlogits_.data(), nullptr, pb + head_w, g + head_w, nullptr,
                  d_head_.data(), rows_, h, V);
  layer_norm_backward(c, kFp32, x_last, mean_f_.data(), rstd_f_.data(), d_head_.data(), pb, g,
                      g + h, nullptr, dout_.data(), rows_, h);
  hooks.after_backward(head_unit);
  // The blocks' backward, then the embeddings'.
  for (size_t i = s_.layers; i-- > 0;) {
    const float* pi = hooks.backward_parameters(1 + i);
    block_backward(c, pi, hooks.gradients(1 + i), i, dout_.data(), dx_.data());
    std::swap(dout_, dx_);
    hooks.after_backward(1 + i);
  }
  (void)hooks.backward_parameters(0);  // none read; ZeRO-3 still gathers it, as FSDP does
  float* g0 = hooks.gradients(0);
  embed_backward(c, dout_.data(), token_.data(), g0 + l_.tok_emb, g0 + l_.pos_emb, rows_, h, b_, V);
  hooks.after_backward(0);
  check(cudaStreamSynchronize(c.stream), "cudaStreamSynchronize (the transformer's loss)");
  double loss = 0;  // in row order, as the host sums it
  for (double v : row_loss_host_) loss += v;
  return loss / denominator;
}

void DeviceTransformer::block_forward(const Context& c, const float* p, size_t i) {
  const BlockLayout& L = l_.block;
  Block& k = blocks_[i];
  const size_t S = s_.seq_len, h = s_.hidden, d = s_.head_dim(), heads = s_.heads;
  const size_t f = s_.ffn_size(), R = rows_, ld = b_ * 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  layer_norm(c, kFp32, x_[i].data(), p + L.ln1_w, p + L.ln1_b, k.a.data(), k.mean1.data(),
             k.rstd1.data(), R, h);
  linear_forward(c, kFp32, k.a.data(), p + L.qkv_w, k.qkv.data(), R, h, 3 * h);
  bias_activation(c, kFp32, std::nullopt, k.qkv.data(), p + L.qkv_b, k.qkv.data(), nullptr, R,
                  3 * h);
  // softmax(Q K^T / sqrt(d), causal) V per sample n and head j: sample n's
  // rows are every b-th, so its matrices have the row stride b x (3h or h).
  for (size_t n = 0; n < b_; ++n)
    for (size_t j = 0; j < heads; ++j) {
      const float* q = k.qkv.data() + n * 3 * h + j * d;
      gemm_rows(c, kFp32, false, true, S, S, d, scale, q, ld, q + h, ld, 0.0f,
                k.probs.data() + (n * heads + j) * S * S, S);
    }
  causal_softmax(c, kFp32, k.probs.data(), b_ * heads, S);
  for (size_t n = 0; n < b_; ++n)
    for (size_t j = 0; j < heads; ++j) {
      const float* v = k.qkv.data() + n * 3 * h + 2 * h + j * d;
      gemm_rows(c, kFp32, false, false, S, d, S, 1.0f, k.probs.data() + (n * heads + j) * S * S, S,
                v, ld, 0.0f, k.attn.data() + n * h + j * d, b_ * h);
    }
  linear_forward(c, kFp32, k.attn.data(), p + L.proj_w, proj_.data(), R, h, h);
  bias_residual(c, kFp32, x_[i].data(), proj_.data(), p + L.proj_b, k.x1.data(), R, h);
  layer_norm(c, kFp32, k.x1.data(), p + L.ln2_w, p + L.ln2_b, k.c.data(), k.mean2.data(),
             k.rstd2.data(), R, h);
  linear_forward(c, kFp32, k.c.data(), p + L.fc1_w, k.h1.data(), R, h, f);
  bias_activation(c, kFp32, std::nullopt, k.h1.data(), p + L.fc1_b, k.h1.data(), nullptr, R, f);
  gelu(c, kFp32, k.h1.data(), k.g.data(), R * f);
  linear_forward(c, kFp32, k.g.data(), p + L.fc2_w, proj_.data(), R, f, h);
  bias_residual(c, kFp32, k.x1.data(), proj_.data(), p + L.fc2_b, x_[i + 1].data(), R, h);
}

void DeviceTransformer::block_backward(const Context& c, const float* p, float* g, size_t i,
                                       const float* dout, float* dx) {
  const BlockLayout& L = l_.block;
  const Block& k = blocks_[i];
  const size_t S = s_.seq_len, h = s_.hidden, d = s_.head_dim(), heads = s_.heads;
  const size_t f = s_.ffn_size(), R = rows_, ld = b_ * 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // The MLP: out = x1 + fc2(gelu(fc1(ln2(x1)))) + fc2.b.
  linear_backward(c, kFp32, k.g.data(), dout, nullptr, p + L.fc2_w, g + L.fc2_w, g + L.fc2_b,
                  dg_.data(), R, f, h);
  gelu_backward(c, kFp32, dg_.data(), k.h1.data(), R * f);
  linear_backward(c, kFp32, k.c.data(), dg_.data(), nullptr, p + L.fc1_w, g + L.fc1_w, g + L.fc1_b,
                  dc_.data(), R, h, f);
  layer_norm_backward(c, kFp32, k.x1.data(), k.mean2.data(), k.rstd2.data(), dc_.data(),
                      p + L.ln2_w, g + L.ln2_w, g + L.ln2_b, dout, dx1_.data(), R, h);
  // Attention: x1 = x + proj(attention(ln1(x))) + proj.b.
  linear_backward(c, kFp32, k.attn.data(), dx1_.data(), nullptr, p + L.proj_w, g + L.proj_w,
                  g + L.proj_b, dattn_.data(), R, h, h);
  for (size_t n = 0; n < b_; ++n)
    for (size_t j = 0; j < heads; ++j) {
      const size_t off = n * 3 * h + j * d, at = (n * heads + j) * S * S;
      const float* v = k.qkv.data() + off + 2 * h;
      const float* d_out = dattn_.data() + n * h + j * d;
      // dP = dO V^T; dV = P^T dO.
      gemm_rows(c, kFp32, false, true, S, S, d, 1.0f, d_out, b_ * h, v, ld, 0.0f, dp_.data() + at,
                S);
      gemm_rows(c, kFp32, true, false, S, d, S, 1.0f, k.probs.data() + at, S, d_out, b_ * h, 0.0f,
                dqkv_.data() + off + 2 * h, ld);
    }
  causal_softmax_backward(c, kFp32, k.probs.data(), dp_.data(), b_ * heads, S);
  for (size_t n = 0; n < b_; ++n)
    for (size_t j = 0; j < heads; ++j) {
      const size_t off = n * 3 * h + j * d, at = (n * heads + j) * S * S;
      const float* q = k.qkv.data() + off;
      // dQ = dS K / sqrt(d); dK = dS^T Q / sqrt(d).
      gemm_rows(c, kFp32, false, false, S, d, S, scale, dp_.data() + at, S, q + h, ld, 0.0f,
                dqkv_.data() + off, ld);
      gemm_rows(c, kFp32, true, false, S, d, S, scale, dp_.data() + at, S, q, ld, 0.0f,
                dqkv_.data() + off + h, ld);
    }
  linear_backward(c, kFp32, k.a.data(), dqkv_.data(), nullptr, p + L.qkv_w, g + L.qkv_w,
                  g + L.qkv_b, da_.data(), R, h, 3 * h);
  layer_norm_backward(c, kFp32, x_[i].data(), k.mean1.data(), k.rstd1.data(), da_.data(),
                      p + L.ln1_w, g + L.ln1_w, g + L.ln1_b, dx1_.data(), dx, R, h);
}

}  // namespace ccscope::training_probe::device

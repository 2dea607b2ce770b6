// The transformer's arithmetic: see ccscope/training_probe/transformer.h.
// Written once as a template over the scalar: float is the model the probe
// trains (rounded to the compute format after every operation, as model.cpp
// does), double the finite-difference tests' reference of the same code.
#include "ccscope/training_probe/transformer.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "ccscope/training_probe/data.h"
#include "transformer_math.h"

namespace ccscope::training_probe {

std::string transformer_problem(const TransformerShape& s, size_t tp, bool sequence_parallel) {
  if (s.vocab < 2) return "--vocab must be at least 2";
  if (s.seq_len == 0 || s.hidden == 0 || s.heads == 0 || s.layers == 0)
    return "--seq-len, --width, --heads and --depth must be at least 1";
  if (s.hidden % s.heads != 0)
    return fmt::format("the hidden size (--width) {} does not divide into {} heads", s.hidden,
                       s.heads);
  if (tp == 0) return "the tensor-parallel degree must be at least 1";
  if (s.heads % tp != 0)
    return fmt::format(
        "{} heads do not split over {} tensor-parallel ranks (Megatron splits whole "
        "heads)",
        s.heads, tp);
  if (s.ffn_size() % tp != 0)
    return fmt::format("the MLP's {} features do not split over {} tensor-parallel ranks",
                       s.ffn_size(), tp);
  if (sequence_parallel && s.seq_len % tp != 0)
    return fmt::format("--sequence-parallel: --seq-len {} does not split over {} ranks", s.seq_len,
                       tp);
  return "";
}

TransformerLayout transformer_layout(const TransformerShape& s, size_t tp, size_t rank) {
  (void)rank;  // every rank's shapes are equal: whole heads, even splits
  const size_t h = s.hidden;
  TransformerLayout l;
  BlockLayout& b = l.block;
  b.heads = s.heads / tp;
  b.ffn = s.ffn_size() / tp;
  const size_t hl = b.heads * s.head_dim();
  size_t at = 0;
  auto take = [&at](size_t n) {
    const size_t begin = at;
    at += n;
    return begin;
  };
  b.ln1_w = take(h);
  b.ln1_b = take(h);
  b.qkv_w = take(3 * hl * h);
  b.qkv_b = take(3 * hl);
  b.proj_w = take(h * hl);
  b.proj_b = take(h);
  b.ln2_w = take(h);
  b.ln2_b = take(h);
  b.fc1_w = take(b.ffn * h);
  b.fc1_b = take(b.ffn);
  b.fc2_w = take(h * b.ffn);
  b.fc2_b = take(h);
  b.size = at;
  l.tok_emb = 0;
  l.pos_emb = s.vocab * h;
  l.total = l.pos_emb + s.seq_len * h;
  l.units.push_back({0, l.total});
  for (size_t i = 0; i < s.layers; ++i) {
    l.blocks.push_back(l.total);
    l.units.push_back({l.total, l.total + b.size});
    l.total += b.size;
  }
  l.lnf_w = l.total;
  l.lnf_b = l.total + h;
  l.head = l.total + 2 * h;
  l.units.push_back({l.total, l.head + s.vocab * h});
  l.total = l.head + s.vocab * h;
  return l;
}

size_t transformer_parameter_count(const TransformerShape& shape) {
  return transformer_layout(shape).total;
}

std::vector<LayerSlice> transformer_slices(const TransformerShape& shape) {
  std::vector<LayerSlice> slices;
  for (const Range& u : transformer_layout(shape).units) {
    LayerSlice s;
    s.weight_offset = u.begin;
    s.weight_count = u.size();
    s.bias_offset = u.end;
    slices.push_back(s);
  }
  return slices;
}

std::vector<float> transformer_initial_parameters(const TransformerShape& s, uint64_t seed) {
  const TransformerLayout l = transformer_layout(s);
  std::vector<float> p(l.total, 0.0f);
  const uint64_t stream = seed + 2000003;  // apart from the data's and the MLP's
  auto fill = [&](size_t begin, size_t n, float bound) {
    for (size_t i = begin; i < begin + n; ++i) p[i] = bound * uniform_pm1(stream, i);
  };
  const size_t h = s.hidden, f = s.ffn_size();
  const float in_h = 1.0f / std::sqrt(static_cast<float>(h));
  const float in_f = 1.0f / std::sqrt(static_cast<float>(f));
  fill(l.tok_emb, s.vocab * h, 1.0f);
  fill(l.pos_emb, s.seq_len * h, 1.0f);
  const BlockLayout& b = l.block;
  for (size_t start : l.blocks) {
    std::fill_n(p.begin() + static_cast<std::ptrdiff_t>(start + b.ln1_w), h, 1.0f);
    fill(start + b.qkv_w, 3 * h * h + 3 * h, in_h);  // weight and bias
    fill(start + b.proj_w, h * h + h, in_h);
    std::fill_n(p.begin() + static_cast<std::ptrdiff_t>(start + b.ln2_w), h, 1.0f);
    fill(start + b.fc1_w, f * h + f, in_h);
    fill(start + b.fc2_w, h * f + h, in_f);
  }
  std::fill_n(p.begin() + static_cast<std::ptrdiff_t>(l.lnf_w), h, 1.0f);
  fill(l.head, s.vocab * h, in_h);
  return p;
}

namespace {

// For each element of rank `rank`'s vector, its index in the full vector.
std::vector<size_t> shard_index(const TransformerShape& s, size_t tp, size_t rank) {
  const TransformerLayout full = transformer_layout(s);
  const TransformerLayout mine = transformer_layout(s, tp, rank);
  const size_t h = s.hidden, d = s.head_dim();
  const size_t hl = mine.block.heads * d, fl = mine.block.ffn;
  std::vector<size_t> at;
  at.reserve(mine.total);
  auto copy = [&at](size_t begin, size_t n) {
    for (size_t i = 0; i < n; ++i) at.push_back(begin + i);
  };
  copy(0, full.blocks.empty() ? full.lnf_w : full.blocks[0]);  // embeddings
  for (size_t i = 0; i < s.layers; ++i) {
    const size_t f0 = full.blocks[i];
    const BlockLayout& fb = full.block;
    copy(f0 + fb.ln1_w, 2 * h);
    // QKV rows: this rank's heads of Q, of K, of V.
    for (size_t part = 0; part < 3; ++part)
      copy(f0 + fb.qkv_w + (part * h + rank * hl) * h, hl * h);
    for (size_t part = 0; part < 3; ++part) copy(f0 + fb.qkv_b + part * h + rank * hl, hl);
    for (size_t r = 0; r < h; ++r) copy(f0 + fb.proj_w + r * h + rank * hl, hl);  // columns
    copy(f0 + fb.proj_b, h);
    copy(f0 + fb.ln2_w, 2 * h);
    copy(f0 + fb.fc1_w + rank * fl * h, fl * h);
    copy(f0 + fb.fc1_b + rank * fl, fl);
    const size_t f = s.ffn_size();
    for (size_t r = 0; r < h; ++r) copy(f0 + fb.fc2_w + r * f + rank * fl, fl);
    copy(f0 + fb.fc2_b, h);
  }
  copy(full.lnf_w, full.total - full.lnf_w);
  return at;
}

}  // namespace

std::vector<float> transformer_shard(const TransformerShape& s, std::span<const float> full,
                                     size_t tp, size_t rank) {
  std::vector<float> out;
  for (size_t i : shard_index(s, tp, rank)) out.push_back(full[i]);
  return out;
}

std::vector<float> transformer_unshard(const TransformerShape& s, std::span<const float> ranks,
                                       size_t tp) {
  std::vector<float> full(transformer_parameter_count(s));
  const size_t local = ranks.size() / tp;
  for (size_t rank = tp; rank-- > 0;) {  // rank 0 last: its copies stay
    const std::vector<size_t> at = shard_index(s, tp, rank);
    if (at.size() != local)
      throw std::invalid_argument("transformer_unshard: a rank's vector of the wrong size");
    for (size_t i = 0; i < local; ++i) full[at[i]] = ranks[rank * local + i];
  }
  return full;
}

std::vector<float> transformer_unique(const TransformerShape& s, size_t tp, size_t rank) {
  const TransformerLayout l = transformer_layout(s, tp, rank);
  std::vector<float> unique(l.total, rank == 0 ? 1.0f : 0.0f);
  const BlockLayout& b = l.block;
  for (size_t start : l.blocks) {
    std::fill_n(unique.begin() + static_cast<std::ptrdiff_t>(start + b.qkv_w), b.proj_b - b.qkv_w,
                1.0f);  // qkv.w, qkv.b, proj.w
    std::fill_n(unique.begin() + static_cast<std::ptrdiff_t>(start + b.fc1_w), b.fc2_b - b.fc1_w,
                1.0f);  // fc1.w, fc1.b, fc2.w
  }
  return unique;
}

std::vector<Range> sequence_parallel_partial(const TransformerShape& s, size_t tp) {
  const TransformerLayout l = transformer_layout(s, tp, 0);
  const BlockLayout& b = l.block;
  std::vector<Range> ranges{{0, l.units[0].end}};
  for (size_t start : l.blocks) {
    ranges.push_back({start + b.ln1_w, start + b.qkv_w});
    ranges.push_back({start + b.proj_b, start + b.fc1_w});  // proj.b, ln2.w, ln2.b
    ranges.push_back({start + b.fc2_b, start + b.size});
  }
  return ranges;
}

TokenDataset make_token_dataset(size_t samples, const TransformerShape& s, uint64_t seed) {
  TokenDataset data;
  data.samples = samples;
  data.length = s.seq_len + 1;
  const size_t v = s.vocab;
  // The teacher's permutation (Fisher-Yates from its own stream).
  std::vector<uint32_t> perm(v);
  for (size_t i = 0; i < v; ++i) perm[i] = static_cast<uint32_t>(i);
  uint64_t state = seed + 3000017;
  for (size_t i = v; i > 1; --i) {
    state = splitmix64(state);
    std::swap(perm[i - 1], perm[state % i]);
  }
  data.tokens.resize(samples * data.length);
  for (size_t n = 0; n < samples; ++n) {
    uint32_t* t = data.tokens.data() + n * data.length;
    t[0] = static_cast<uint32_t>(splitmix64(splitmix64(seed + 4000037) ^ (2 * n)) % v);
    if (data.length > 1)
      t[1] = static_cast<uint32_t>(splitmix64(splitmix64(seed + 4000037) ^ (2 * n + 1)) % v);
    for (size_t i = 2; i < data.length; ++i) t[i] = perm[(t[i - 1] + t[i - 2]) % v];
  }
  return data;
}

std::vector<uint32_t> gather_sequences(const TokenDataset& data, std::span<const size_t> indices) {
  std::vector<uint32_t> out;
  out.reserve(indices.size() * data.length);
  for (size_t i : indices) {
    const auto seq = data.sequence(i);
    out.insert(out.end(), seq.begin(), seq.end());
  }
  return out;
}

namespace {

// ---------------------------------------------------------------- kernels
// C = alpha op(A) op(B) + beta C, row-major, over OpenBLAS.
void gemm(bool ta, bool tb, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
          const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}
void gemm(bool ta, bool tb, size_t m, size_t n, size_t k, double alpha, const double* a, size_t lda,
          const double* b, size_t ldb, double beta, double* c, size_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// y [rows x out] = x [rows x in] W^T (+ bias when given).
template <typename T>
void linear(const std::vector<T>& x, size_t rows, size_t in, size_t out, const T* w, const T* bias,
            std::vector<T>& y) {
  y.assign(rows * out, T(0));
  if (bias)
    for (size_t r = 0; r < rows; ++r) std::copy_n(bias, out, y.data() + r * out);
  gemm(false, true, rows, out, in, T(1), x.data(), in, w, in, T(1), y.data(), out);
}

// dW += dy^T x, db += column sums of dy (db may be null), dx = dy W.
template <typename T>
void linear_grad(const std::vector<T>& x, const std::vector<T>& dy, size_t rows, size_t in,
                 size_t out, const T* w, T* dw, T* db, std::vector<T>& dx) {
  gemm(true, false, out, in, rows, T(1), dy.data(), out, x.data(), in, T(1), dw, in);
  if (db)
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < out; ++c) db[c] += dy[r * out + c];
  dx.assign(rows * in, T(0));
  gemm(false, false, rows, in, out, T(1), dy.data(), out, w, in, T(0), dx.data(), in);
}

template <typename T>
void add_bias(std::vector<T>& y, size_t rows, size_t n, const T* bias) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < n; ++c) y[r * n + c] += bias[c];
}

template <typename T>
void bias_grad(const std::vector<T>& dy, size_t rows, size_t n, T* db) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < n; ++c) db[c] += dy[r * n + c];
}

using transformer_math::gelu;
using transformer_math::gelu_derivative;
using transformer_math::layer_norm;
using transformer_math::layer_norm_grad;

// What one block keeps for backward (rows: this rank's positions; "full": every position).
template <typename T>
struct BlockCache {
  std::vector<T> x;                    // input, rows
  std::vector<T> mean1, rstd1, a;      // ln1 statistics; a: ln1 output, full
  std::vector<T> qkv, probs, attn;     // full; probs empty under selective recompute
  std::vector<T> x1, mean2, rstd2, c;  // after attention, rows; ln2 statistics; c: ln2 output full
  std::vector<T> h1, g;                // fc1 output and its GELU, full
};

template <typename T>
class Impl {
 public:
  Impl(const TransformerShape& shape, Precision precision, const TransformerParallel& parallel,
       const TransformerLayout& layout, TensorGroup* group)
      : s_(shape),
        precision_(precision),
        p_(parallel),
        l_(layout),
        group_(group),
        h_(shape.hidden),
        d_(shape.head_dim()),
        heads_(layout.block.heads),
        hl_(heads_ * d_),
        fl_(layout.block.ffn),
        sp_(parallel.sequence_parallel && parallel.tp > 1) {
    if (parallel.tp > 1 && !group)
      throw std::logic_error("a tensor-parallel transformer without a tensor group");
  }

  template <typename Hooks>
  double micro_batch(std::span<const uint32_t> seqs, size_t batch, size_t batch_total,
                     double grad_scale, Hooks& hooks) {
    // (held_: the blocks' activation elements at the end of the forward.)
    b_ = batch;
    rows_full_ = s_.seq_len * batch;
    rows_ = sp_ ? rows_full_ / p_.tp : rows_full_;
    row0_ = sp_ ? p_.rank * rows_ : 0;
    seqs_ = seqs;
    // Forward.
    std::vector<T> x = embed(hooks.forward_parameters(0));
    hooks.after_forward(0);
    std::vector<BlockCache<T>> caches(s_.layers);
    for (size_t i = 0; i < s_.layers; ++i) {
      const T* p = hooks.forward_parameters(1 + i);
      BlockCache<T>& c = caches[i];
      x = block_forward(p, std::move(x), c, p_.recompute != Recompute::kSelective);
      if (p_.recompute == Recompute::kFull) {
        std::vector<T> input = std::move(c.x);
        c = BlockCache<T>{};
        c.x = std::move(input);
      }
      hooks.after_forward(1 + i);
    }
    held_ = 0;
    for (const BlockCache<T>& c : caches)
      for (const std::vector<T>* v : {&c.x, &c.mean1, &c.rstd1, &c.a, &c.qkv, &c.probs, &c.attn,
                                      &c.x1, &c.mean2, &c.rstd2, &c.c, &c.h1, &c.g})
        held_ += v->size();
    const size_t head_unit = s_.layers + 1;
    std::vector<T> dx;
    const double loss = head(hooks.forward_parameters(head_unit), std::move(x), batch_total,
                             grad_scale, hooks, head_unit, dx);
    // Backward (the head's ran with its forward: the loss's gradient needs nothing else).
    for (size_t i = s_.layers; i-- > 0;) {
      const size_t unit = 1 + i;
      const T* p = hooks.backward_parameters(unit);
      BlockCache<T>& c = caches[i];
      if (p_.recompute == Recompute::kFull) {
        std::vector<T> input = c.x;
        block_forward(p, std::move(input), c, true);
      }
      T* g = hooks.gradients(unit);
      dx = block_backward(p, g, c, std::move(dx));
      round({g, l_.block.size});
      c = BlockCache<T>{};
      hooks.after_backward(unit);
    }
    const T* p0 = hooks.backward_parameters(0);
    (void)p0;  // the embedding's backward reads no parameter; ZeRO-3 still gathers it as FSDP does
    T* g0 = hooks.gradients(0);
    embed_backward(g0, dx);
    round({g0, l_.units[0].size()});
    hooks.after_backward(0);
    return loss;
  }

 private:
  void round(std::span<T> values) const {
    if constexpr (std::is_same_v<T, float>) round_to(precision_, values);
  }
  void round(std::vector<T>& values) const { round(std::span<T>(values)); }

  // ---- the tensor group's operators (Megatron's f and g, or SP's gather and scatter)
  // Before a column-parallel GEMM (and the gradient of a row-parallel output):
  // this rank's rows to every row (sequence parallel), else as is.
  std::vector<T> gather_rows(std::vector<T> mine) {
    if (!sp_) return mine;
    if constexpr (std::is_same_v<T, float>) {
      std::vector<T> full;
      group_->all_gather(mine, full);
      return full;
    }
    throw std::logic_error("float64 runs on one rank");
  }
  // After a row-parallel GEMM (and the gradient of a column-parallel input):
  // partial sums summed, to this rank's rows (sequence parallel) or every row.
  std::vector<T> reduce_rows(std::vector<T> partial) {
    if (p_.tp == 1) return partial;
    if constexpr (std::is_same_v<T, float>) {
      if (!sp_) {
        group_->all_reduce(partial);
        return partial;
      }
      std::vector<T> mine;
      group_->reduce_scatter(partial, mine);
      return mine;
    }
    throw std::logic_error("float64 runs on one rank");
  }

  // ---- embeddings (unit 0)
  size_t position(size_t row) const { return (row0_ + row) / b_; }
  size_t sample(size_t row) const { return (row0_ + row) % b_; }
  uint32_t token(size_t sample, size_t pos) const { return seqs_[sample * (s_.seq_len + 1) + pos]; }

  std::vector<T> embed(const T* p) {
    std::vector<T> x(rows_ * h_);
    for (size_t r = 0; r < rows_; ++r) {
      const T* te = p + l_.tok_emb + token(sample(r), position(r)) * h_;
      const T* pe = p + l_.pos_emb + position(r) * h_;
      for (size_t i = 0; i < h_; ++i) x[r * h_ + i] = te[i] + pe[i];
    }
    round(x);
    return x;
  }

  void embed_backward(T* g, const std::vector<T>& dx) {
    for (size_t r = 0; r < rows_; ++r) {
      T* te = g + l_.tok_emb + token(sample(r), position(r)) * h_;
      T* pe = g + l_.pos_emb + position(r) * h_;
      for (size_t i = 0; i < h_; ++i) {
        te[i] += dx[r * h_ + i];
        pe[i] += dx[r * h_ + i];
      }
    }
  }

  // ---- attention core: softmax(Q K^T / sqrt(d), causal) V per sample and head
  T scale() const { return T(1) / std::sqrt(static_cast<T>(d_)); }
  size_t qkv_ld() const { return b_ * 3 * hl_; }  // a position's row stride in one sample

  // Sample n, head j's probabilities [S x S] into `probs`.
  void attention_probs(const std::vector<T>& qkv, size_t n, size_t j, T* probs) const {
    const size_t S = s_.seq_len;
    const T* q = qkv.data() + n * 3 * hl_ + j * d_;
    const T* k = q + hl_;
    gemm(false, true, S, S, d_, scale(), q, qkv_ld(), k, qkv_ld(), T(0), probs, S);
    transformer_math::causal_softmax(probs, S);
    round({probs, S * S});
  }

  // attn [rows_full x hl] from qkv; probabilities kept when `keep`.
  void attention(const std::vector<T>& qkv, std::vector<T>& probs, std::vector<T>& attn,
                 bool keep) const {
    const size_t S = s_.seq_len;
    attn.assign(rows_full_ * hl_, T(0));
    std::vector<T> scratch(S * S);
    if (keep) probs.assign(b_ * heads_ * S * S, T(0));
    for (size_t n = 0; n < b_; ++n)
      for (size_t j = 0; j < heads_; ++j) {
        T* pr = keep ? probs.data() + (n * heads_ + j) * S * S : scratch.data();
        attention_probs(qkv, n, j, pr);
        const T* v = qkv.data() + n * 3 * hl_ + 2 * hl_ + j * d_;
        gemm(false, false, S, d_, S, T(1), pr, S, v, qkv_ld(), T(0), attn.data() + n * hl_ + j * d_,
             b_ * hl_);
      }
    round(attn);
  }

  // dqkv from dattn (probabilities from `probs`, or recomputed when it is empty).
  std::vector<T> attention_grad(const std::vector<T>& qkv, const std::vector<T>& probs,
                                const std::vector<T>& dattn) const {
    const size_t S = s_.seq_len;
    std::vector<T> dqkv(rows_full_ * 3 * hl_, T(0));
    std::vector<T> recomputed(probs.empty() ? S * S : 0), dp(S * S);
    for (size_t n = 0; n < b_; ++n)
      for (size_t j = 0; j < heads_; ++j) {
        const T* pr = recomputed.data();
        if (probs.empty())  // selective recomputation
          attention_probs(qkv, n, j, recomputed.data());
        else  // (no offset taken from an empty vector's null data)
          pr = probs.data() + (n * heads_ + j) * S * S;
        const size_t off = n * 3 * hl_ + j * d_;
        const T* q = qkv.data() + off;
        const T* k = q + hl_;
        const T* v = q + 2 * hl_;
        const T* dout = dattn.data() + n * hl_ + j * d_;
        const size_t ldo = b_ * hl_;
        // dP = dO V^T; dV = P^T dO.
        gemm(false, true, S, S, d_, T(1), dout, ldo, v, qkv_ld(), T(0), dp.data(), S);
        gemm(true, false, S, d_, S, T(1), pr, S, dout, ldo, T(0), dqkv.data() + off + 2 * hl_,
             qkv_ld());
        transformer_math::causal_softmax_backward(pr, dp.data(), S);
        round(dp);
        // dQ = dS K / sqrt(d); dK = dS^T Q / sqrt(d).
        gemm(false, false, S, d_, S, scale(), dp.data(), S, k, qkv_ld(), T(0), dqkv.data() + off,
             qkv_ld());
        gemm(true, false, S, d_, S, scale(), dp.data(), S, q, qkv_ld(), T(0),
             dqkv.data() + off + hl_, qkv_ld());
      }
    round(dqkv);
    return dqkv;
  }

  // ---- a block (units 1..layers)
  std::vector<T> block_forward(const T* p, std::vector<T> x, BlockCache<T>& c, bool keep_probs) {
    const BlockLayout& L = l_.block;
    c.x = std::move(x);
    std::vector<T> a;
    layer_norm(c.x, rows_, h_, p + L.ln1_w, p + L.ln1_b, a, c.mean1, c.rstd1);
    round(a);
    c.a = gather_rows(std::move(a));
    linear(c.a, rows_full_, h_, 3 * hl_, p + L.qkv_w, p + L.qkv_b, c.qkv);
    round(c.qkv);
    attention(c.qkv, c.probs, c.attn, keep_probs);
    std::vector<T> proj;
    linear(c.attn, rows_full_, hl_, h_, p + L.proj_w, static_cast<const T*>(nullptr), proj);
    round(proj);
    proj = reduce_rows(std::move(proj));
    add_bias(proj, rows_, h_, p + L.proj_b);  // once, after the partial sums
    c.x1 = c.x;
    for (size_t i = 0; i < c.x1.size(); ++i) c.x1[i] += proj[i];
    round(c.x1);
    std::vector<T> cn;
    layer_norm(c.x1, rows_, h_, p + L.ln2_w, p + L.ln2_b, cn, c.mean2, c.rstd2);
    round(cn);
    c.c = gather_rows(std::move(cn));
    linear(c.c, rows_full_, h_, fl_, p + L.fc1_w, p + L.fc1_b, c.h1);
    round(c.h1);
    c.g.resize(c.h1.size());
    for (size_t i = 0; i < c.h1.size(); ++i) c.g[i] = gelu(c.h1[i]);
    round(c.g);
    std::vector<T> m;
    linear(c.g, rows_full_, fl_, h_, p + L.fc2_w, static_cast<const T*>(nullptr), m);
    round(m);
    m = reduce_rows(std::move(m));
    add_bias(m, rows_, h_, p + L.fc2_b);
    std::vector<T> out = c.x1;
    for (size_t i = 0; i < out.size(); ++i) out[i] += m[i];
    round(out);
    return out;
  }

  std::vector<T> block_backward(const T* p, T* g, const BlockCache<T>& c, std::vector<T> dout) {
    const BlockLayout& L = l_.block;
    // The MLP: out = x1 + fc2(gelu(fc1(ln2(x1)))) + fc2.b.
    bias_grad(dout, rows_, h_, g + L.fc2_b);
    const std::vector<T> dm = gather_rows(dout);
    std::vector<T> dg;
    linear_grad(c.g, dm, rows_full_, fl_, h_, p + L.fc2_w, g + L.fc2_w, static_cast<T*>(nullptr),
                dg);
    for (size_t i = 0; i < dg.size(); ++i) dg[i] *= gelu_derivative(c.h1[i]);
    round(dg);
    std::vector<T> dc;
    linear_grad(c.c, dg, rows_full_, h_, fl_, p + L.fc1_w, g + L.fc1_w, g + L.fc1_b, dc);
    round(dc);
    dc = reduce_rows(std::move(dc));
    std::vector<T> dx1;
    layer_norm_grad(c.x1, c.mean2, c.rstd2, dc, rows_, h_, p + L.ln2_w, g + L.ln2_w, g + L.ln2_b,
                    dx1);
    for (size_t i = 0; i < dx1.size(); ++i) dx1[i] += dout[i];  // the residual
    round(dx1);
    // Attention: x1 = x + proj(attention(ln1(x))) + proj.b.
    bias_grad(dx1, rows_, h_, g + L.proj_b);
    const std::vector<T> dp = gather_rows(dx1);
    std::vector<T> dattn;
    linear_grad(c.attn, dp, rows_full_, hl_, h_, p + L.proj_w, g + L.proj_w,
                static_cast<T*>(nullptr), dattn);
    round(dattn);
    const std::vector<T> dqkv = attention_grad(c.qkv, c.probs, dattn);
    std::vector<T> da;
    linear_grad(c.a, dqkv, rows_full_, h_, 3 * hl_, p + L.qkv_w, g + L.qkv_w, g + L.qkv_b, da);
    round(da);
    da = reduce_rows(std::move(da));
    std::vector<T> dx;
    layer_norm_grad(c.x, c.mean1, c.rstd1, da, rows_, h_, p + L.ln1_w, g + L.ln1_w, g + L.ln1_b,
                    dx);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += dx1[i];
    round(dx);
    return dx;
  }

  // ---- the final norm, the head and the loss (the last unit), forward and
  // backward: every rank computes them on every position (under sequence
  // parallelism after gathering the rows), so a rank's rows' gradient is its
  // slice of the whole, with no communication.
  template <typename Hooks>
  double head(const T* p, std::vector<T> x, size_t batch_total, double grad_scale, Hooks& hooks,
              size_t unit, std::vector<T>& dx_mine) {
    const std::vector<T> xf = gather_rows(std::move(x));
    std::vector<T> y, mean, rstd;
    layer_norm(xf, rows_full_, h_, p, p + h_, y, mean, rstd);
    round(y);
    const size_t V = s_.vocab;
    const T* w = p + (l_.head - l_.lnf_w);
    std::vector<T> logits;
    linear(y, rows_full_, h_, V, w, static_cast<const T*>(nullptr), logits);
    round(logits);
    hooks.after_forward(unit);
    // Cross-entropy, and its gradient (softmax - one-hot) / (tokens of the global batch).
    const double denominator = static_cast<double>(batch_total) * static_cast<double>(s_.seq_len);
    const T factor = static_cast<T>(grad_scale / denominator);
    double loss = 0;
    std::vector<T> dlogits(logits.size());
    for (size_t r = 0; r < rows_full_; ++r) {
      const T* row = logits.data() + r * V;
      const size_t pos = r / b_, n = r % b_;
      const uint32_t target = token(n, pos + 1);
      T top = row[0];
      for (size_t v = 1; v < V; ++v) top = std::max(top, row[v]);
      double sum = 0;
      for (size_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v] - top));
      loss += std::log(sum) - static_cast<double>(row[target] - top);
      for (size_t v = 0; v < V; ++v) {
        const double prob = std::exp(static_cast<double>(row[v] - top)) / sum;
        dlogits[r * V + v] = static_cast<T>(prob - (v == target ? 1.0 : 0.0)) * factor;
      }
    }
    round(dlogits);
    const T* pb = hooks.backward_parameters(unit);
    T* g = hooks.gradients(unit);
    std::vector<T> dy;
    linear_grad(y, dlogits, rows_full_, h_, V, pb + (l_.head - l_.lnf_w), g + (l_.head - l_.lnf_w),
                static_cast<T*>(nullptr), dy);
    round(dy);
    std::vector<T> dxf;
    layer_norm_grad(xf, mean, rstd, dy, rows_full_, h_, pb, g, g + h_, dxf);
    round(dxf);
    round({g, l_.units[unit].size()});
    hooks.after_backward(unit);
    dx_mine.assign(dxf.begin() + static_cast<std::ptrdiff_t>(row0_ * h_),
                   dxf.begin() + static_cast<std::ptrdiff_t>((row0_ + rows_) * h_));
    return loss / denominator;
  }

  const TransformerShape& s_;
  Precision precision_;
  const TransformerParallel& p_;
  const TransformerLayout& l_;
  TensorGroup* group_;
  size_t h_, d_, heads_, hl_, fl_;
  bool sp_;
  size_t b_ = 0, rows_full_ = 0, rows_ = 0, row0_ = 0;

 public:
  size_t held_ = 0;
  std::span<const uint32_t> seqs_;
};

}  // namespace

Transformer::Transformer(TransformerShape shape, Precision precision, TransformerParallel parallel)
    : shape_(shape),
      precision_(precision),
      parallel_(parallel),
      layout_(transformer_layout(shape, parallel.tp, parallel.rank)) {
  const std::string problem = transformer_problem(shape, parallel.tp, parallel.sequence_parallel);
  if (!problem.empty()) throw std::invalid_argument(problem);
}

double Transformer::train_micro_batch(std::span<const uint32_t> sequences, size_t batch,
                                      size_t batch_total, float grad_scale, UnitHooks& hooks,
                                      TensorGroup* group, size_t* held) const {
  if (sequences.size() != batch * (shape_.seq_len + 1))
    throw std::invalid_argument("train_micro_batch: sequences of the wrong length");
  Impl<float> impl(shape_, precision_, parallel_, layout_, group);
  const double loss = impl.micro_batch(sequences, batch, batch_total, grad_scale, hooks);
  if (held) *held = impl.held_;
  return loss;
}

namespace {

// UnitHooks over a float64 vector, for the reference (the same code's double instantiation).
class DoubleUnits {
 public:
  DoubleUnits(const TransformerLayout& l, const double* p, double* g) : l_(l), p_(p), g_(g) {}
  const double* forward_parameters(size_t u) { return p_ + l_.units[u].begin; }
  const double* backward_parameters(size_t u) { return p_ + l_.units[u].begin; }
  double* gradients(size_t u) { return g_ + l_.units[u].begin; }
  void after_forward(size_t) {}
  void after_backward(size_t) {}

 private:
  const TransformerLayout& l_;
  const double* p_;
  double* g_;
};

}  // namespace

double transformer_loss_and_gradients_f64(const TransformerShape& shape,
                                          std::span<const double> parameters,
                                          std::span<const uint32_t> sequences, size_t batch,
                                          std::vector<double>& gradients) {
  const std::string problem = transformer_problem(shape, 1, false);
  if (!problem.empty()) throw std::invalid_argument(problem);
  const TransformerParallel one;
  const TransformerLayout layout = transformer_layout(shape);
  if (parameters.size() != layout.total || sequences.size() != batch * (shape.seq_len + 1))
    throw std::invalid_argument("transformer_loss_and_gradients_f64: wrong sizes");
  gradients.assign(layout.total, 0.0);
  DoubleUnits units(layout, parameters.data(), gradients.data());
  Impl<double> impl(shape, Precision::kFloat32, one, layout, nullptr);
  return impl.micro_batch(sequences, batch, batch, 1.0, units);
}

}  // namespace ccscope::training_probe

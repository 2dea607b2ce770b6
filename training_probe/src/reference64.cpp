#include "ccscope/training_probe/reference64.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/transformer.h"

namespace ccscope::training_probe {
namespace {

// A ReLU input closer to 0 than this fraction of its layer's rms may take the
// other branch in the run's format: float32's GEMM rounding and the drift of a
// float32 trajectory from a float64 one stay below 1e-6 of the rms over the
// probe's runs; 16-bit formats are coarser by their unit roundoff's ratio.
double kink_fraction(Precision precision) {
  switch (precision) {
    case Precision::kFloat32:
      return 1e-6;
    case Precision::kBFloat16:
      return 1e-6 * 65536.0;  // 2^-8 / 2^-24
    case Precision::kFloat16:
      return 1e-6 * 8192.0;  // 2^-11 / 2^-24
  }
  return 1e-6;
}

// Row-major C[m x n] = A[m x k] op B, double, through OpenBLAS.
void gemm(bool transpose_a, bool transpose_b, size_t m, size_t n, size_t k, const double* a,
          const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0, a, static_cast<int>(transpose_a ? m : k), b,
              static_cast<int>(transpose_b ? k : n), 0.0, c, static_cast<int>(n));
}

struct Adam {
  std::vector<double> m, v;
  size_t t = 0;
};

}  // namespace

std::string reference64_unsupported(const TrainOptions& options) {
  if (options.strategy == Strategy::kExpert)
    return "the float64 reference models the dense MLP, not ep's mixture layers";
  return "";
}

Reference64 reference64_losses(const TrainOptions& o, const std::vector<bool>& skipped) {
  const size_t w = o.shape.width, depth = o.shape.depth, batch = o.global_batch;
  const size_t samples = dataset_size(o);
  const SyntheticDataset data =
      o.model == TrainedModel::kMlp ? make_teacher_dataset(samples, w, o.seed) : SyntheticDataset{};
  const std::vector<float> initial = o.model == TrainedModel::kTransformer
                                         ? transformer_initial_parameters(o.transformer, o.seed)
                                         : initial_parameters(o.shape, o.seed);
  std::vector<double> p(initial.begin(), initial.end());
  const size_t layer_size = w * w + w;  // W [out x in] then b, per layer
  const bool relu = o.shape.activation == Activation::kRelu;
  const double kink = kink_fraction(o.precision);
  const OptimizerOptions& opt = o.optimizer;

  Reference64 ref;
  ref.format = o.precision;
  std::vector<double> momentum;  // SGD
  Adam adam;
  std::vector<std::vector<double>> inputs(depth + 1), pre(depth);
  std::vector<double> grad(p.size()), dy, dx;
  // The MLP's loss over step `step`'s global batch and its gradient (into grad).
  auto mlp_loss_and_gradients = [&](size_t step) {
    const std::vector<size_t> rows = batch_samples(samples, 1, 0, batch, o.seed, step);
    std::vector<double>& x = inputs[0];
    x.resize(batch * w);
    for (size_t r = 0; r < batch; ++r) std::copy_n(data.input(rows[r]).data(), w, x.data() + r * w);
    // Forward: pre_l = x_l W_l^T + b_l; x_{l+1} = f(pre_l) but for the last layer.
    for (size_t l = 0; l < depth; ++l) {
      const double* weight = p.data() + l * layer_size;
      const double* bias = weight + w * w;
      pre[l].resize(batch * w);
      gemm(false, true, batch, w, w, inputs[l].data(), weight, pre[l].data());
      for (size_t r = 0; r < batch; ++r)
        for (size_t j = 0; j < w; ++j) pre[l][r * w + j] += bias[j];
      std::vector<double>& out = inputs[l + 1];
      out = pre[l];
      if (l + 1 == depth) break;
      if (relu) {
        double squares = 0, nearest = INFINITY;
        for (double v : pre[l]) {
          squares += v * v;
          nearest = std::min(nearest, std::abs(v));
        }
        const double rms = std::sqrt(squares / static_cast<double>(pre[l].size()));
        if (!ref.first_kink_step && rms > 0 && nearest < kink * rms) {
          ref.first_kink_step = step;
          ref.kink_margin = nearest / rms;
        }
        for (double& v : out) v = std::max(v, 0.0);
      } else {
        for (double& v : out) v = std::tanh(v);
      }
    }
    // MSE over the batch and features, and d loss / d output.
    const std::vector<double>& y = inputs[depth];
    const double n = static_cast<double>(batch * w);
    double loss = 0;
    dy.resize(batch * w);
    for (size_t r = 0; r < batch; ++r)
      for (size_t j = 0; j < w; ++j) {
        const double diff = y[r * w + j] - static_cast<double>(data.target(rows[r])[j]);
        loss += diff * diff;
        dy[r * w + j] = 2.0 * diff / n;
      }
    // Backward.
    for (size_t l = depth; l-- > 0;) {
      if (l + 1 < depth)  // through f after layer l: dy *= f'(pre_l)
        for (size_t i = 0; i < dy.size(); ++i)
          dy[i] *= relu ? (pre[l][i] > 0 ? 1.0 : 0.0) : 1.0 - inputs[l + 1][i] * inputs[l + 1][i];
      double* weight_grad = grad.data() + l * layer_size;
      double* bias_grad = weight_grad + w * w;
      gemm(true, false, w, w, batch, dy.data(), inputs[l].data(), weight_grad);
      for (size_t j = 0; j < w; ++j) {
        double sum = 0;
        for (size_t r = 0; r < batch; ++r) sum += dy[r * w + j];
        bias_grad[j] = sum;
      }
      if (l == 0) break;
      dx.resize(batch * w);
      gemm(false, false, batch, w, w, dy.data(), p.data() + l * layer_size, dx.data());
      dy.swap(dx);
    }
    return loss / n;
  };
  // The transformer's: its float64 arithmetic (transformer.h), the whole batch.
  const TokenDataset tokens = o.model == TrainedModel::kTransformer
                                  ? make_token_dataset(samples, o.transformer, o.seed)
                                  : TokenDataset{};
  auto transformer_loss_and_gradients = [&](size_t step) {
    const std::vector<size_t> rows = batch_samples(samples, 1, 0, batch, o.seed, step);
    return transformer_loss_and_gradients_f64(o.transformer, p, gather_sequences(tokens, rows),
                                              batch, grad);
  };
  for (size_t step = 0; step < o.steps; ++step) {
    ref.losses.push_back(o.model == TrainedModel::kTransformer
                             ? transformer_loss_and_gradients(step)
                             : mlp_loss_and_gradients(step));
    if (step < skipped.size() && skipped[step]) continue;
    // torch.nn.utils.clip_grad_norm_: multiply by max_norm / (norm + 1e-6), clamped to 1.
    if (o.grad_clip) {
      double squares = 0;
      for (double g : grad) squares += g * g;
      const double coefficient = std::min(1.0, *o.grad_clip / (std::sqrt(squares) + 1e-6));
      for (double& g : grad) g *= coefficient;
    }
    // torch.optim: SGD (momentum, dampening 0, weight decay added to the
    // gradient), Adam (the same), AdamW (decay decoupled: p *= 1 - lr wd).
    const double lr = opt.lr, wd = opt.weight_decay;
    if (opt.kind == OptimizerKind::kSgd) {
      if (opt.momentum != 0 && momentum.empty()) momentum.assign(p.size(), 0.0);
      for (size_t i = 0; i < p.size(); ++i) {
        double d = grad[i] + wd * p[i];
        if (opt.momentum != 0) {
          momentum[i] = adam.t == 0 ? d : opt.momentum * momentum[i] + d;
          d = momentum[i];
        }
        p[i] -= lr * d;
      }
      adam.t++;  // SGD: only whether the buffer has started
      continue;
    }
    if (adam.m.empty()) adam.m.assign(p.size(), 0.0), adam.v.assign(p.size(), 0.0);
    const double t = static_cast<double>(++adam.t);
    const double correction1 = 1.0 - std::pow(opt.beta1, t);
    const double correction2 = 1.0 - std::pow(opt.beta2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (opt.kind == OptimizerKind::kAdamW)
        p[i] *= 1.0 - lr * wd;
      else
        g += wd * p[i];
      adam.m[i] = opt.beta1 * adam.m[i] + (1.0 - opt.beta1) * g;
      adam.v[i] = opt.beta2 * adam.v[i] + (1.0 - opt.beta2) * g * g;
      const double m_hat = adam.m[i] / correction1;
      const double v_hat = adam.v[i] / correction2;
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + opt.eps);
    }
  }
  return ref;
}

EquivalenceResult compare_with_reference64(std::span<const double> curve,
                                           const Reference64& reference, double tolerance,
                                           size_t horizon) {
  const size_t kink_limit =
      reference.first_kink_step ? *reference.first_kink_step + 1 : reference.losses.size();
  EquivalenceResult e =
      compare_losses(curve, reference.losses, tolerance, std::min(kink_limit, horizon));
  e.reference = "float64 reference";
  if (reference.first_kink_step && kink_limit <= horizon)
    e.note = fmt::format(
        "stopped after step {}: a ReLU input {:.2g} of its layer's rms from 0, within {}'s "
        "rounding, where runs may take the other branch",
        *reference.first_kink_step, reference.kink_margin, name(reference.format));
  return e;
}

}  // namespace ccscope::training_probe

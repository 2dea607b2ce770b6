// The training probe's device operations (src/device/device_ops.h) against the
// host arithmetic they stand for (model.cpp, optimizer.cpp), on the same
// inputs. Run twice (tests/device/CMakeLists.txt): under the CUDA/cuBLAS
// stand-in (--standin: kernels through the emulation library, cuBLAS on the
// host) and on a real GPU (--gpu). How results are compared:
//  - elementwise kernels, the bias gradient, the optimizers, the 16-bit
//    conversions: bit for bit (the kernels are built with --fmad=false and
//    compute in the host's order); tanh within 2 fp32 ulp on a GPU (CUDA's
//    tanhf), exact under the stand-in (the host's tanhf);
//  - GEMMs: cuBLAS sums in another order than OpenBLAS, so each element within
//    4 k 2^-24 sum_l |a_l b_l| (twice the classic bound for both sides), plus one
//    16-bit ulp of the result where it is rounded to bf16/fp16 afterwards;
//  - the loss (fp32 dot product against the host's double sum) and the norm:
//    relative 2 n 2^-24;
//  - the transformer's kernels (transformer.cpp's loops): bit for bit under
//    the stand-in; on a GPU the ones that call erff/expf (GELU, the softmax)
//    within 8 fp32 ulp and the cross-entropy (double exp/log) within 2, the
//    rest bit for bit; the whole model (its GEMMs in cuBLAS's order) within
//    1e-4 of the largest gradient.
#include "device_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ccscope/collectives/types.h"
#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/optimizer.h"
#include "ccscope/training_probe/transformer.h"
#include "device_transformer.h"
#include "kernel_launch.h"
#include "transformer_math.h"

namespace tp = ccscope::training_probe;
namespace dev = ccscope::training_probe::device;
using tp::Activation;
using tp::Precision;

namespace {

bool g_standin = false;  // the stand-in, not a GPU, runs the tests

constexpr Precision kPrecisions[] = {Precision::kFloat32, Precision::kBFloat16,
                                     Precision::kFloat16};

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(generator);
  return v;
}

std::vector<float> rounded(Precision p, std::vector<float> v) {
  tp::round_to(p, v);
  return v;
}

// One 16-bit ulp at `value` (0 for fp32).
double ulp16(Precision p, double value) {
  if (p == Precision::kFloat32) return 0;
  const int mantissa_bits = p == Precision::kBFloat16 ? 8 : 11;
  const double magnitude = std::max(std::fabs(value), p == Precision::kBFloat16 ? 1e-38 : 6.1e-5);
  return std::ldexp(1.0, std::ilogb(magnitude) - (mantissa_bits - 1));
}

bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

void expect_same_bits(const std::vector<float>& device, const std::vector<float>& host,
                      const std::string& what) {
  ASSERT_EQ(device.size(), host.size()) << what;
  size_t differing = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    if (!same_bits(device[i], host[i]) && differing++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: device " << device[i] << " host " << host[i];
  }
  EXPECT_EQ(differing, 0u) << what;
}

struct Device {
  dev::DeviceAllocator allocator;
  dev::Stream stream;
  dev::BlasHandle blas{stream.get()};
  dev::Context context() const { return {stream.get(), blas.get(), false}; }

  template <class T>
  dev::DeviceBuffer<T> upload(const std::vector<T>& host) {
    dev::DeviceBuffer<T> buffer(allocator, host.size());
    buffer.upload(host, stream.get());
    stream.synchronize();  // the stand-in reads pageable host memory on the worker
    return buffer;
  }
  template <class T>
  std::vector<T> download(const dev::DeviceBuffer<T>& buffer) {
    std::vector<T> host(buffer.size());
    buffer.download(host, stream.get());
    stream.synchronize();
    return host;
  }
};

// A GEMM operand: its fp32 values and, for bf16/fp16, the 16-bit copy.
struct Operand {
  dev::DeviceBuffer<float> values;
  dev::DeviceBuffer<uint16_t> words;
  const void* gemm() const {
    return words.size() ? static_cast<const void*>(words.data()) : values.data();
  }
};

Operand operand(Device& d, Precision p, const std::vector<float>& host) {
  Operand o{d.upload(host), {}};
  if (p != Precision::kFloat32) {
    o.words = dev::DeviceBuffer<uint16_t>(d.allocator, host.size());
    dev::to_16(d.context(), p, o.values.data(), o.words.data(), host.size());
  }
  return o;
}

// |device - host| within the GEMM bound (see the top of the file); `magnitude`
// is sum_l |a_l b_l| (+ |initial value|) of each element.
void expect_gemm_close(const std::vector<float>& device, const std::vector<float>& host,
                       const std::vector<double>& magnitude, size_t k, Precision rounded_to,
                       double extra, const std::string& what, double rounding_ulps = 1) {
  ASSERT_EQ(device.size(), host.size());
  size_t bad = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    const double bound = 4.0 * static_cast<double>(k) * std::ldexp(magnitude[i], -24) +
                         rounding_ulps * ulp16(rounded_to, host[i]) + extra * std::fabs(host[i]) +
                         1e-30;
    if (!(std::fabs(static_cast<double>(device[i]) - host[i]) <= bound) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: device " << device[i] << " host " << host[i]
                    << " bound " << bound;
  }
  EXPECT_EQ(bad, 0u) << what;
}

// sum_l |x[r][l] w[c][l]| for the forward's element (r, c).
std::vector<double> forward_magnitude(const std::vector<float>& x, const std::vector<float>& w,
                                      const std::vector<float>& bias, size_t batch, size_t in,
                                      size_t out) {
  std::vector<double> m(batch * out);
  for (size_t r = 0; r < batch; ++r)
    for (size_t c = 0; c < out; ++c) {
      double s = std::fabs(bias[c]);
      for (size_t l = 0; l < in; ++l)
        s += std::fabs(static_cast<double>(x[r * in + l]) * w[c * in + l]);
      m[r * out + c] = s;
    }
  return m;
}

// ---- the transformer's host arithmetic (transformer_math.h), T = float, for
// its kernels to be held against.
namespace host_transformer {

using ccscope::training_probe::transformer_math::causal_softmax;
using ccscope::training_probe::transformer_math::causal_softmax_backward;
using ccscope::training_probe::transformer_math::gelu;
using ccscope::training_probe::transformer_math::gelu_derivative;
using ccscope::training_probe::transformer_math::layer_norm;
using ccscope::training_probe::transformer_math::layer_norm_grad;

}  // namespace host_transformer

// |device - host| within `ulps` fp32 ulps of host (0: the same bits).
void expect_within_ulps(const std::vector<float>& device, const std::vector<float>& host,
                        double ulps, const std::string& what) {
  if (ulps == 0) return expect_same_bits(device, host, what);
  ASSERT_EQ(device.size(), host.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    const double magnitude = std::max(std::fabs(static_cast<double>(host[i])), 1.1754944e-38);
    const double bound = ulps * std::ldexp(1.0, std::ilogb(magnitude) - 23);
    if (!(std::fabs(static_cast<double>(device[i]) - host[i]) <= bound) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: device " << device[i] << " host " << host[i];
  }
  EXPECT_EQ(bad, 0u) << what;
}

class DeviceOps : public ::testing::Test {
 protected:
  Device d;
};

TEST_F(DeviceOps, SixteenBitConversionsMatchTheHost) {
  std::vector<float> values = random_values(4096, 1, 70000.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            1.00390625f,
                            1.005859375f,
                            65504.0f,
                            65520.0f,
                            65536.0f,
                            6.0e-8f,
                            3.0e-8f,
                            2.9e-8f,
                            1e-40f,
                            -1e-40f,
                            3.4e38f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  values.insert(values.end(), std::begin(specials), std::end(specials));
  for (size_t i = 0; i < 1024; ++i)
    values.push_back(
        std::ldexp(1.0f + static_cast<float>(i) / 1024, -30 + static_cast<int>(i % 60)));
  for (Precision p : {Precision::kBFloat16, Precision::kFloat16}) {
    auto buffer = d.upload(values);
    dev::DeviceBuffer<uint16_t> words(d.allocator, values.size());
    dev::to_16(d.context(), p, buffer.data(), words.data(), values.size());
    const std::vector<uint16_t> device_words = d.download(words);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t host = p == Precision::kBFloat16 ? ccscope::float_to_bfloat16(values[i])
                                                      : ccscope::float_to_half(values[i]);
      ASSERT_EQ(device_words[i], host) << tp::name(p) << " of " << values[i];
    }
    dev::round_to(d.context(), p, buffer.data(), values.size());
    expect_same_bits(d.download(buffer), rounded(p, values),
                     std::string("round_to ") + std::string(tp::name(p)));
    dev::DeviceBuffer<float> back(d.allocator, values.size());
    dev::from_16(d.context(), p, words.data(), back.data(), values.size());
    expect_same_bits(d.download(back), rounded(p, values),
                     std::string("from_16 ") + std::string(tp::name(p)));
  }
}

TEST_F(DeviceOps, LinearForwardMatchesTheHost) {
  const size_t batch = 24, in = 40, out = 56;
  for (Precision p : kPrecisions) {
    for (std::optional<Activation> activation :
         {std::optional<Activation>(Activation::kRelu),
          std::optional<Activation>(Activation::kTanh), std::optional<Activation>()}) {
      const std::string what =
          std::string(tp::name(p)) + " " +
          (activation ? std::string(tp::name(*activation)) : std::string("none"));
      const auto x = rounded(p, random_values(batch * in, 2));
      const auto w = rounded(p, random_values(out * in, 3, 0.3f));
      const auto bias = rounded(p, random_values(out, 4, 0.3f));
      // The host: model.cpp's forward_layer.
      std::vector<float> pre(batch * out), host_out;
      tp::linear_forward(x, batch, in, out, w.data(), bias.data(), pre.data());
      tp::round_to(p, pre);
      if (activation)
        tp::activate(*activation, p, pre, host_out);
      else
        host_out = pre;

      Operand xd = operand(d, p, x), wd = operand(d, p, w);
      auto bd = d.upload(bias);
      dev::DeviceBuffer<float> pre_d(d.allocator, batch * out), out_d(d.allocator, batch * out);
      dev::DeviceBuffer<uint16_t> out16(d.allocator, p == Precision::kFloat32 ? 0 : batch * out);
      dev::linear_forward(d.context(), p, xd.gemm(), wd.gemm(), pre_d.data(), batch, in, out);
      dev::bias_activation(d.context(), p, activation, pre_d.data(), bd.data(), out_d.data(),
                           out16.data(), batch, out);
      const auto magnitude = forward_magnitude(x, w, bias, batch, in, out);
      const auto device_pre = d.download(pre_d);
      expect_gemm_close(device_pre, pre, magnitude, in, p, 0, what + " pre");
      // The activation of the device's own pre-activation is exact (tanh: CUDA's tanhf within 2
      // ulp).
      std::vector<float> expected_out;
      if (activation)
        tp::activate(*activation, p, device_pre, expected_out);
      else
        expected_out = device_pre;
      const auto device_out = d.download(out_d);
      if (activation == Activation::kTanh && !g_standin) {
        for (size_t i = 0; i < expected_out.size(); ++i)
          ASSERT_NEAR(device_out[i], expected_out[i],
                      2 * std::ldexp(std::fabs(expected_out[i]), -23) + ulp16(p, expected_out[i]))
              << what << " out[" << i << "]";
      } else {
        expect_same_bits(device_out, expected_out, what + " out");
      }
      if (p != Precision::kFloat32) {
        const auto words = d.download(out16);
        for (size_t i = 0; i < words.size(); ++i)
          ASSERT_EQ(words[i], p == Precision::kBFloat16 ? ccscope::float_to_bfloat16(device_out[i])
                                                        : ccscope::float_to_half(device_out[i]))
              << what << " out16[" << i << "]";
      }
      // And the whole layer against the host's within the GEMM bound (tanh' <= 1).
      expect_gemm_close(device_out, host_out, magnitude, in, p,
                        activation == Activation::kTanh ? 4e-7 : 0, what + " out vs host",
                        // tanh: a flip of pre's rounding, then of out's.
                        activation == Activation::kTanh ? 2 : 1);
    }
  }
}

TEST_F(DeviceOps, LinearBackwardMatchesTheHost) {
  const size_t batch = 20, in = 36, out = 28;
  for (Precision p : kPrecisions) {
    const std::string what(tp::name(p));
    const auto x = rounded(p, random_values(batch * in, 5));
    const auto w = rounded(p, random_values(out * in, 6, 0.3f));
    const auto dy = rounded(p, random_values(batch * out, 7, 0.01f));
    // Gradients accumulate (micro-batches): start from nonzero ones.
    const auto w_grad0 = rounded(p, random_values(out * in, 8, 0.05f));
    const auto b_grad0 = rounded(p, random_values(out, 9, 0.05f));
    std::vector<float> w_grad = w_grad0, b_grad = b_grad0, dx(batch * in);
    tp::linear_backward(x, dy, batch, in, out, w.data(), w_grad.data(), b_grad.data(), dx.data());
    tp::round_to(p, w_grad);
    tp::round_to(p, b_grad);
    tp::round_to(p, dx);

    Operand xd = operand(d, p, x), wd = operand(d, p, w);
    auto dyd = d.upload(dy);
    dev::DeviceBuffer<uint16_t> dy16(d.allocator, p == Precision::kFloat32 ? 0 : batch * out);
    auto w_grad_d = d.upload(w_grad0), b_grad_d = d.upload(b_grad0);
    dev::DeviceBuffer<float> dx_d(d.allocator, batch * in);
    dev::linear_backward(d.context(), p, xd.gemm(), dyd.data(), dy16.data(), wd.gemm(),
                         w_grad_d.data(), b_grad_d.data(), dx_d.data(), batch, in, out);
    std::vector<double> w_mag(out * in), dx_mag(batch * in);
    for (size_t c = 0; c < out; ++c)
      for (size_t l = 0; l < in; ++l) {
        double s = std::fabs(w_grad0[c * in + l]);
        for (size_t r = 0; r < batch; ++r)
          s += std::fabs(static_cast<double>(dy[r * out + c]) * x[r * in + l]);
        w_mag[c * in + l] = s;
      }
    for (size_t r = 0; r < batch; ++r)
      for (size_t l = 0; l < in; ++l) {
        double s = 0;
        for (size_t c = 0; c < out; ++c)
          s += std::fabs(static_cast<double>(dy[r * out + c]) * w[c * in + l]);
        dx_mag[r * in + l] = s;
      }
    expect_gemm_close(d.download(w_grad_d), w_grad, w_mag, batch, p, 0, what + " weight gradient");
    expect_gemm_close(d.download(dx_d), dx, dx_mag, out, p, 0, what + " input gradient");
    // The bias gradient sums rows in the host's order: exact.
    expect_same_bits(d.download(b_grad_d), b_grad, what + " bias gradient");
  }
}

TEST_F(DeviceOps, ActivationBackwardMatchesTheHostExactly) {
  const size_t n = 3000;
  for (Precision p : kPrecisions)
    for (Activation a : {Activation::kRelu, Activation::kTanh}) {
      auto pre = rounded(p, random_values(n, 10, 2.0f));
      pre[0] = 0.0f;  // relu's boundary: the gradient stops at pre <= 0
      pre[1] = -0.0f;
      std::vector<float> out;
      tp::activate(a, p, pre, out);
      const auto grad0 = rounded(p, random_values(n, 11));
      std::vector<float> grad = grad0;
      tp::activation_backward(a, p, pre, out, grad);
      auto pre_d = d.upload(pre), out_d = d.upload(out), grad_d = d.upload(grad0);
      dev::activation_backward(d.context(), p, a, grad_d.data(), pre_d.data(), out_d.data(), n);
      expect_same_bits(d.download(grad_d), grad,
                       std::string(tp::name(p)) + " " + std::string(tp::name(a)) + " backward");
    }
}

// The mixture of experts' row moves and combine (device_expert_trainer.cpp)
// against the host path's loops (parallel_trainer.cpp's Expert), bit for bit:
// a token's rows are added in send order, and a dropped slot (-1) adds nothing.
TEST_F(DeviceOps, MixtureRowMovesAndCombineMatchTheHostExactly) {
  const size_t tokens = 5, k = 2, w = 7, rows = 7;
  const auto x = random_values(tokens * w, 20);
  const auto values = random_values(rows * w, 21);
  const auto dy = random_values(tokens * w, 22);
  // Rows in send order: (token, weight); token 3 has one row, token 4 none.
  const std::vector<uint32_t> token = {2, 0, 1, 2, 0, 1, 3};
  const std::vector<float> weight = {0.25f, 0.5f, 0.125f, 0.375f, 0.3f, 0.7f, 0.9f};
  std::vector<int32_t> row_of_slot(tokens * k, -1);
  std::vector<float> weight_of_slot(tokens * k, 0.0f);
  std::vector<size_t> used(tokens, 0);
  for (size_t r = 0; r < rows; ++r) {
    const size_t slot = token[r] * k + used[token[r]]++;
    row_of_slot[slot] = static_cast<int32_t>(r);
    weight_of_slot[slot] = weight[r];
  }
  // Host: gather, then y = x + sum g values in send order; backward's rows and dots.
  std::vector<float> gathered(rows * w), y = x, d_rows(rows * w), d_weight(rows);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < w; ++c) {
      gathered[r * w + c] = x[token[r] * w + c];
      y[token[r] * w + c] += weight[r] * values[r * w + c];
    }
  for (size_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (size_t c = 0; c < w; ++c) {
      d_rows[r * w + c] = weight[r] * dy[token[r] * w + c];
      dot += static_cast<double>(dy[token[r] * w + c]) * values[r * w + c];
    }
    d_weight[r] = static_cast<float>(dot);
  }
  auto x_d = d.upload(x), values_d = d.upload(values), dy_d = d.upload(dy);
  auto token_d = d.upload(token);
  auto weight_d = d.upload(weight);
  auto slot_d = d.upload(row_of_slot);
  auto slot_weight_d = d.upload(weight_of_slot);
  dev::DeviceBuffer<float> gathered_d(d.allocator, rows * w), back_d(d.allocator, tokens * w);
  dev::DeviceBuffer<float> d_rows_d(d.allocator, rows * w), d_weight_d(d.allocator, rows);
  auto y_d = d.upload(x);
  const dev::Context c = d.context();
  dev::gather_rows(c, x_d.data(), token_d.data(), gathered_d.data(), rows, w);
  dev::combine_rows(c, y_d.data(), values_d.data(), slot_d.data(), slot_weight_d.data(), tokens, k,
                    w);
  dev::combine_backward(c, dy_d.data(), values_d.data(), token_d.data(), weight_d.data(),
                        d_rows_d.data(), d_weight_d.data(), rows, w);
  expect_same_bits(d.download(gathered_d), gathered, "gather_rows");
  expect_same_bits(d.download(y_d), y, "combine_rows");
  expect_same_bits(d.download(d_rows_d), d_rows, "combine_backward rows");
  expect_same_bits(d.download(d_weight_d), d_weight, "combine_backward weights");
  // Scatter undoes a gather by a permutation; no weights: the rows added as they are.
  const std::vector<uint32_t> permutation = {3, 0, 4, 1, 2};
  auto permutation_d = d.upload(permutation);
  dev::DeviceBuffer<float> moved(d.allocator, tokens * w);
  dev::gather_rows(c, x_d.data(), permutation_d.data(), moved.data(), tokens, w);
  dev::scatter_rows(c, moved.data(), permutation_d.data(), back_d.data(), tokens, w);
  expect_same_bits(d.download(back_d), x, "scatter_rows after gather_rows");
  std::vector<float> summed = x;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c2 = 0; c2 < w; ++c2) summed[token[r] * w + c2] += values[r * w + c2];
  auto sum_d = d.upload(x);
  dev::combine_rows(c, sum_d.data(), values_d.data(), slot_d.data(), nullptr, tokens, k, w);
  expect_same_bits(d.download(sum_d), summed, "combine_rows without weights");
}

TEST_F(DeviceOps, MseLossAndGradientMatchTheHost) {
  const size_t batch = 32, width = 48, batch_total = 64;
  const auto output = random_values(batch * width, 12);
  const auto target = random_values(batch * width, 13);
  for (float grad_scale : {1.0f, 1024.0f}) {
    std::vector<float> grad;
    const double loss = tp::mse_loss(output, target, batch, width, batch_total, grad_scale, grad);
    auto out_d = d.upload(output), target_d = d.upload(target);
    dev::DeviceBuffer<float> diff(d.allocator, batch * width), grad_d(d.allocator, batch * width);
    const double device_loss =
        dev::mse_loss(d.context(), out_d.data(), target_d.data(), diff.data(), grad_d.data(), batch,
                      width, batch_total, grad_scale);
    EXPECT_NEAR(device_loss, loss, 2.0 * batch * width * std::ldexp(loss, -24))
        << "scale " << grad_scale;
    EXPECT_GT(device_loss, 0.0);
    expect_same_bits(d.download(grad_d), grad, "MSE gradient");
  }
}

void expect_optimizer_matches(Device& d, const tp::OptimizerOptions& options,
                              const std::string& what) {
  const size_t n = 5000;
  std::vector<float> params = random_values(n, 14);
  tp::Optimizer host(options, n);
  auto params_d = d.upload(params);
  dev::DeviceOptimizer device(d.allocator, options, n, d.stream.get());
  EXPECT_EQ(device.state_bytes(), host.state_bytes()) << what;
  for (size_t step = 1; step <= 3; ++step) {
    const auto grads = random_values(n, 100 + static_cast<uint32_t>(step), 0.1f);
    host.step(params, grads, step);
    auto grads_d = d.upload(grads);
    device.step(d.context(), params_d.data(), grads_d.data(), step);
    expect_same_bits(d.download(params_d), params,
                     what + " parameters after step " + std::to_string(step));
  }
  if (options.kind != tp::OptimizerKind::kSgd) {
    const auto v = host.second_moment();
    expect_same_bits(d.download(device.second_moment()), std::vector<float>(v.begin(), v.end()),
                     what + " v");
  }
}

TEST_F(DeviceOps, OptimizerStepsMatchTheHostExactly) {
  tp::OptimizerOptions sgd;
  sgd.kind = tp::OptimizerKind::kSgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  sgd.weight_decay = 0.01;
  expect_optimizer_matches(d, sgd, "sgd momentum wd");
  sgd.momentum = 0.0;
  sgd.weight_decay = 0.0;
  expect_optimizer_matches(d, sgd, "sgd plain");
  tp::OptimizerOptions adam;
  adam.kind = tp::OptimizerKind::kAdam;
  adam.lr = 1e-3;
  adam.weight_decay = 0.01;
  expect_optimizer_matches(d, adam, "adam wd");
  adam.kind = tp::OptimizerKind::kAdamW;
  adam.weight_decay = 0.1;
  expect_optimizer_matches(d, adam, "adamw wd 0.1");
}

TEST_F(DeviceOps, MixedPrecisionStepEndAndScaling) {
  const size_t n = 4000;
  auto master = random_values(n, 15, 3.0f);
  auto master_d = d.upload(master);
  for (Precision p : {Precision::kBFloat16, Precision::kFloat16}) {
    dev::DeviceBuffer<float> params_d(d.allocator, n);
    dev::DeviceBuffer<uint16_t> words(d.allocator, n);
    dev::round_copy(d.context(), p, master_d.data(), params_d.data(), words.data(), n);
    expect_same_bits(d.download(params_d), rounded(p, master),
                     std::string("round_copy ") + std::string(tp::name(p)));
  }
  // Unscaling and clipping: values *= factor, as the host's loop.
  const float factor = 1.0f / 1024.0f * 0.37f;
  std::vector<float> scaled = master;
  for (float& v : scaled) v *= factor;
  dev::scale(d.context(), master_d.data(), n, factor);
  expect_same_bits(d.download(master_d), scaled, "scale");
  double squares = 0;
  for (float v : scaled) squares += static_cast<double>(v) * v;
  const double host_norm = std::sqrt(squares);
  EXPECT_NEAR(dev::norm(d.context(), master_d.data(), n), host_norm,
              2.0 * n * std::ldexp(host_norm, -24));
}

TEST_F(DeviceOps, OverflowCheckFindsInfAndNan) {
  auto values = random_values(10000, 16);
  dev::DeviceBuffer<int> flag(d.allocator, 1);
  auto clean = d.upload(values);
  EXPECT_FALSE(dev::any_nonfinite(d.context(), clean.data(), values.size(), flag.data()));
  values[7777] = std::numeric_limits<float>::infinity();
  auto with_inf = d.upload(values);
  EXPECT_TRUE(dev::any_nonfinite(d.context(), with_inf.data(), values.size(), flag.data()));
  values[7777] = 1.0f;
  values[0] = std::numeric_limits<float>::quiet_NaN();
  auto with_nan = d.upload(values);
  EXPECT_TRUE(dev::any_nonfinite(d.context(), with_nan.data(), values.size(), flag.data()));
  // The flag is cleared by each check.
  EXPECT_FALSE(dev::any_nonfinite(d.context(), clean.data(), values.size(), flag.data()));
}

TEST_F(DeviceOps, AllocatorTracksThePeakAndMemGetInfoSeesIt) {
  const auto before = dev::device_memory_info();
  EXPECT_GT(before.total_bytes, 0u);
  dev::DeviceAllocator allocator;
  {
    // Sizes of whole 2 MiB pages and above, which a GPU driver maps at once.
    dev::DeviceBuffer<float> a(allocator, 1 << 24);  // 64 MiB
    {
      dev::DeviceBuffer<float> b(allocator, 1 << 25);  // 128 MiB
      EXPECT_EQ(allocator.bytes_in_use(), size_t{3} << 26);
      const auto during = dev::device_memory_info();
      EXPECT_GE(before.free_bytes - during.free_bytes, size_t{3} << 26);
    }
    dev::DeviceBuffer<float> c(allocator, 1 << 23);  // 32 MiB
    EXPECT_EQ(allocator.bytes_in_use(), (size_t{3} << 25));
    dev::DeviceBuffer<float> moved = std::move(c);
    EXPECT_EQ(allocator.bytes_in_use(), (size_t{3} << 25));
  }
  EXPECT_EQ(allocator.bytes_in_use(), 0u);
  EXPECT_EQ(allocator.peak_bytes(), size_t{3} << 26);
  allocator.reset_peak();
  EXPECT_EQ(allocator.peak_bytes(), 0u);
}

TEST_F(DeviceOps, ErrorsCarryTheLibrarysOwnMessage) {
  auto a = d.upload(std::vector<float>(64, 1.0f));
  const float one = 1.0f, zero = 0.0f;
  // lda < m: cuBLAS refuses it (the real library and the stand-in alike).
  const cublasStatus_t status = cublasGemmEx(
      d.blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, a.data(), CUDA_R_32F, 4, a.data(),
      CUDA_R_32F, 8, &zero, a.data(), CUDA_R_32F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  EXPECT_EQ(status, CUBLAS_STATUS_INVALID_VALUE);
  try {
    dev::check(status, "gemm");
    FAIL() << "no exception";
  } catch (const dev::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos)
        << e.what();
  }
  try {
    dev::DeviceBuffer<float> huge(d.allocator, size_t{1} << 50);
    FAIL() << "allocated 4 PiB";
  } catch (const dev::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaErrorMemoryAllocation"), std::string::npos)
        << e.what();
  }
}

TEST_F(DeviceOps, Tf32IsOffByDefault) {
  // A = 1 + 2^-12 (not a TF32 value), B = 1, k = 64: the exact fp32 result is
  // 64 + 2^-6 (every partial sum exact); with TF32 inputs it is 64.
  const size_t m = 64, n = 64, k = 64;
  auto a = d.upload(std::vector<float>(m * k, 1.0f + std::ldexp(1.0f, -12)));
  auto b = d.upload(std::vector<float>(k * n, 1.0f));
  dev::DeviceBuffer<float> c(d.allocator, m * n);
  dev::linear_forward(d.context(), Precision::kFloat32, a.data(), b.data(), c.data(), n, k, m);
  for (float v : d.download(c)) ASSERT_EQ(v, 64.0f + std::ldexp(1.0f, -6));
  dev::Context tf32 = d.context();
  tf32.tf32 = true;
  dev::linear_forward(tf32, Precision::kFloat32, a.data(), b.data(), c.data(), n, k, m);
  const float with_tf32 = d.download(c)[0];
  if (g_standin)
    EXPECT_EQ(with_tf32, 64.0f);  // the stand-in rounds inputs to TF32 (cvt.rna)
  else
    std::printf(
        "note: with CUBLAS_COMPUTE_32F_FAST_TF32 the GPU computed %.9g (TF32 inputs give 64)\n",
        with_tf32);
}

TEST_F(DeviceOps, DotAndNrm2InDevicePointerMode) {
  const auto x = random_values(1000, 17);
  auto xd = d.upload(x);
  dev::DeviceBuffer<float> result(d.allocator, 2);
  ASSERT_EQ(cublasSetPointerMode(d.blas.get(), CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSdot(d.blas.get(), 1000, xd.data(), 1, xd.data(), 1, result.data()),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSnrm2(d.blas.get(), 1000, xd.data(), 1, result.data() + 1),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetPointerMode(d.blas.get(), CUBLAS_POINTER_MODE_HOST), CUBLAS_STATUS_SUCCESS);
  const auto r = d.download(result);
  double squares = 0;
  for (float v : x) squares += static_cast<double>(v) * v;
  EXPECT_NEAR(r[0], squares, 2e-4 * squares);
  EXPECT_NEAR(r[1], std::sqrt(squares), 2e-4 * std::sqrt(squares));
  // Saxpy and Sgemm, the other two entry points of the stand-in.
  auto y = d.upload(std::vector<float>(1000, 0.5f));
  const float two = 2.0f;
  ASSERT_EQ(cublasSaxpy(d.blas.get(), 1000, &two, xd.data(), 1, y.data(), 1),
            CUBLAS_STATUS_SUCCESS);
  const auto yh = d.download(y);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(yh[i], 2.0f * x[i] + 0.5f, 1e-6) << i;
}

// The pieces composed as the engine will: a whole model's forward, loss,
// backward and an AdamW step on the device against tp::Model and
// tp::Optimizer. The GEMMs' summation order differs, and for bf16 the loss's
// gradient enters the backward GEMMs rounded (the host keeps it in fp32), so
// loss and gradients compare within a relative bound: 1e-5 of the largest
// gradient for fp32, 3 bf16 ulps (2^-6) of it for bf16.
TEST_F(DeviceOps, AModelStepMatchesTheHost) {
  for (Precision p : {Precision::kFloat32, Precision::kBFloat16}) {
    for (Activation activation : {Activation::kRelu, Activation::kTanh}) {
      const std::string what = std::string(tp::name(p)) + " " + std::string(tp::name(activation));
      const tp::ModelShape shape{32, 3, activation};
      const size_t batch = 16, width = shape.width, batch_total = 32;
      const tp::Model model(shape, p);
      const auto& slices = model.slices();
      const std::vector<float> initial = rounded(p, tp::initial_parameters(shape, 7));
      const auto x = random_values(batch * width, 20);
      const auto target = random_values(batch * width, 21);

      // The host.
      tp::ForwardCache cache;
      model.forward(initial, x, batch, cache);
      std::vector<float> grad;
      const double loss = tp::mse_loss(cache.output, target, batch, width, batch_total, 1.0f, grad);
      std::vector<float> grads(model.parameter_count(), 0.0f);
      for (size_t l = shape.depth; l-- > 0;)
        model.backward_layer(l, initial.data() + slices[l].begin(), cache, grad,
                             grads.data() + slices[l].begin());
      tp::OptimizerOptions options;
      options.kind = tp::OptimizerKind::kAdamW;
      options.lr = 1e-3;
      options.weight_decay = 0.1;
      tp::Optimizer host_optimizer(options, model.parameter_count());
      std::vector<float> master = initial, params = initial;
      host_optimizer.step(master, grads, 1);
      for (size_t i = 0; i < params.size(); ++i) params[i] = tp::round_to(p, master[i]);

      // The device: the same steps through device_ops.h.
      const dev::Context c = d.context();
      const bool mixed = p != Precision::kFloat32;
      auto params_d = d.upload(initial);
      auto master_d = d.upload(initial);
      dev::DeviceBuffer<uint16_t> params16(d.allocator, mixed ? initial.size() : 0);
      if (mixed) dev::to_16(c, p, params_d.data(), params16.data(), initial.size());
      auto weights = [&](size_t l) -> const void* {
        return mixed ? static_cast<const void*>(params16.data() + slices[l].weight_offset)
                     : params_d.data() + slices[l].weight_offset;
      };
      std::vector<dev::DeviceBuffer<float>> inputs, pres;
      std::vector<dev::DeviceBuffer<uint16_t>> inputs16;
      for (size_t l = 0; l <= shape.depth; ++l) {  // inputs[depth]: the output
        inputs.emplace_back(d.allocator, batch * width);
        inputs16.emplace_back(d.allocator, mixed ? batch * width : 0);
        if (l < shape.depth) pres.emplace_back(d.allocator, batch * width);
      }
      inputs[0].upload(x, c.stream);
      dev::round_to(c, p, inputs[0].data(), x.size());
      if (mixed) dev::to_16(c, p, inputs[0].data(), inputs16[0].data(), x.size());
      auto input = [&](size_t l) -> const void* {
        return mixed ? static_cast<const void*>(inputs16[l].data()) : inputs[l].data();
      };
      for (size_t l = 0; l < shape.depth; ++l) {
        dev::linear_forward(c, p, input(l), weights(l), pres[l].data(), batch, width, width);
        const bool last = l + 1 == shape.depth;
        dev::bias_activation(c, p, last ? std::nullopt : std::optional<Activation>(activation),
                             pres[l].data(), params_d.data() + slices[l].bias_offset,
                             inputs[l + 1].data(), mixed ? inputs16[l + 1].data() : nullptr, batch,
                             width);
      }
      auto target_d = d.upload(target);
      dev::DeviceBuffer<float> diff(d.allocator, batch * width), grad_a(d.allocator, batch * width),
          grad_b(d.allocator, batch * width);
      dev::DeviceBuffer<uint16_t> dy16(d.allocator, mixed ? batch * width : 0);
      const double device_loss =
          dev::mse_loss(c, inputs[shape.depth].data(), target_d.data(), diff.data(), grad_a.data(),
                        batch, width, batch_total, 1.0f);
      dev::DeviceBuffer<float> grads_d(d.allocator, grads.size());
      grads_d.zero(c.stream);
      float* dy = grad_a.data();
      float* dx = grad_b.data();
      for (size_t l = shape.depth; l-- > 0;) {
        if (l + 1 < shape.depth)
          dev::activation_backward(c, p, activation, dy, pres[l].data(), inputs[l + 1].data(),
                                   batch * width);
        dev::linear_backward(
            c, p, input(l), dy, dy16.data(), weights(l), grads_d.data() + slices[l].weight_offset,
            grads_d.data() + slices[l].bias_offset, l > 0 ? dx : nullptr, batch, width, width);
        std::swap(dy, dx);
      }
      dev::DeviceOptimizer optimizer(d.allocator, options, grads.size(), c.stream);
      optimizer.step(c, master_d.data(), grads_d.data(), 1);
      dev::round_copy(c, p, master_d.data(), params_d.data(), mixed ? params16.data() : nullptr,
                      grads.size());

      EXPECT_NEAR(device_loss, loss, (mixed ? 0x1p-6 : 1e-5) * loss) << what;
      const auto device_grads = d.download(grads_d);
      float largest = 0;
      for (float g : grads) largest = std::max(largest, std::fabs(g));
      ASSERT_GT(largest, 0.0f);
      const double tolerance = (mixed ? 0x1p-6 : 1e-5) * largest;
      for (size_t i = 0; i < grads.size(); ++i)
        ASSERT_NEAR(device_grads[i], grads[i], tolerance) << what << " gradient " << i;
      // Adam's first step moves each parameter by about lr times the sign of its gradient: compared
      // where the gradient is clearly away from 0 (elsewhere its sign may differ between the two).
      const auto device_params = d.download(params_d);
      size_t moved = 0;
      for (size_t i = 0; i < params.size(); ++i) {
        if (std::fabs(grads[i]) > tolerance * 4) {
          ASSERT_NEAR(device_params[i], params[i], mixed ? ulp16(p, params[i]) * 1.01 + 1e-7 : 1e-6)
              << what << " parameter " << i;
          ++moved;
        }
      }
      // Not vacuous: relu leaves many gradients at 0, bf16 rounds many small ones to near it.
      EXPECT_GT(moved, params.size() / 8) << what;
    }
  }
}

// The transformer's embedding and its deterministic gradient (one thread per
// element, rows in order), bit for bit: rows in [seq x batch] order, a
// repeated token, gradients accumulated onto earlier values.
TEST_F(DeviceOps, TransformerEmbeddingMatchesTheHostExactly) {
  const size_t S = 5, b = 3, h = 7, V = 6, rows = S * b;
  const std::vector<uint32_t> token = {0, 3, 3, 5, 1, 3, 2, 2, 0, 4, 3, 1, 5, 5, 0};
  const auto tok_emb = random_values(V * h, 30), pos_emb = random_values(S * h, 31);
  const auto dx = random_values(rows * h, 32);
  std::vector<float> tok_grad = random_values(V * h, 33), pos_grad = random_values(S * h, 34);
  std::vector<float> x(rows * h);
  auto tok_grad_d = d.upload(tok_grad), pos_grad_d = d.upload(pos_grad);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < h; ++i) {
      x[r * h + i] = tok_emb[token[r] * h + i] + pos_emb[(r / b) * h + i];
      tok_grad[token[r] * h + i] += dx[r * h + i];
      pos_grad[(r / b) * h + i] += dx[r * h + i];
    }
  auto tok_d = d.upload(tok_emb), pos_d = d.upload(pos_emb), dx_d = d.upload(dx);
  auto token_d = d.upload(token);
  dev::DeviceBuffer<float> x_d(d.allocator, rows * h);
  const dev::Context c = d.context();
  dev::embed(c, Precision::kFloat32, tok_d.data(), pos_d.data(), token_d.data(), x_d.data(), rows,
             h, b);
  dev::embed_backward(c, dx_d.data(), token_d.data(), tok_grad_d.data(), pos_grad_d.data(), rows, h,
                      b, V);
  expect_same_bits(d.download(x_d), x, "embed");
  expect_same_bits(d.download(tok_grad_d), tok_grad, "token embedding gradient");
  expect_same_bits(d.download(pos_grad_d), pos_grad, "position embedding gradient");
}

// Layer norm forward (y, the rows' mean and rstd) and backward (dx with the
// residual added; dw, db accumulated), bit for bit.
TEST_F(DeviceOps, TransformerLayerNormMatchesTheHostExactly) {
  const size_t rows = 6, h = 33;
  std::vector<float> x = random_values(rows * h, 40, 3.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] += 0.5f * static_cast<float>(i / h);  // row means
  const auto w = random_values(h, 41), b = random_values(h, 42);
  const auto dy = random_values(rows * h, 43), residual = random_values(rows * h, 44);
  std::vector<float> y, mean, rstd, dx, dw = random_values(h, 45), db = random_values(h, 46);
  auto dw_d = d.upload(dw), db_d = d.upload(db);
  host_transformer::layer_norm(x, rows, h, w.data(), b.data(), y, mean, rstd);
  host_transformer::layer_norm_grad(x, mean, rstd, dy, rows, h, w.data(), dw.data(), db.data(), dx);
  for (size_t i = 0; i < dx.size(); ++i) dx[i] += residual[i];
  auto x_d = d.upload(x), w_d = d.upload(w), b_d = d.upload(b), dy_d = d.upload(dy);
  auto residual_d = d.upload(residual);
  dev::DeviceBuffer<float> y_d(d.allocator, rows * h), mean_d(d.allocator, rows),
      rstd_d(d.allocator, rows), dx_d(d.allocator, rows * h);
  const dev::Context c = d.context();
  dev::layer_norm(c, Precision::kFloat32, x_d.data(), w_d.data(), b_d.data(), y_d.data(),
                  mean_d.data(), rstd_d.data(), rows, h);
  dev::layer_norm_backward(c, Precision::kFloat32, x_d.data(), mean_d.data(), rstd_d.data(),
                           dy_d.data(), w_d.data(), dw_d.data(), db_d.data(), residual_d.data(),
                           dx_d.data(), rows, h);
  expect_same_bits(d.download(y_d), y, "layer norm");
  expect_same_bits(d.download(mean_d), mean, "layer norm mean");
  expect_same_bits(d.download(rstd_d), rstd, "layer norm rstd");
  expect_same_bits(d.download(dx_d), dx, "layer norm dx + residual");
  expect_same_bits(d.download(dw_d), dw, "layer norm dw");
  expect_same_bits(d.download(db_d), db, "layer norm db");
}

// GELU and its derivative, the causal softmax and its backward, the
// cross-entropy with its gradient, the bias + residual and the add: the host's
// loops (see the top of the file for the GPU's ulps).
TEST_F(DeviceOps, TransformerRowKernelsMatchTheHost) {
  const dev::Context c = d.context();
  const Precision f32 = Precision::kFloat32;
  const double special_ulps = g_standin ? 0 : 8;  // erff, expf
  {
    const size_t n = 257;
    const auto h = random_values(n, 50, 4.0f);
    const auto grad = random_values(n, 51);
    std::vector<float> out(n), dgrad = grad;
    for (size_t i = 0; i < n; ++i) {
      out[i] = host_transformer::gelu(h[i]);
      dgrad[i] *= host_transformer::gelu_derivative(h[i]);
    }
    auto h_d = d.upload(h), grad_d = d.upload(grad);
    dev::DeviceBuffer<float> out_d(d.allocator, n);
    dev::gelu(c, f32, h_d.data(), out_d.data(), n);
    dev::gelu_backward(c, f32, grad_d.data(), h_d.data(), n);
    expect_within_ulps(d.download(out_d), out, special_ulps, "gelu");
    expect_within_ulps(d.download(grad_d), dgrad, special_ulps, "gelu backward");
  }
  {
    const size_t S = 7, count = 3;
    const auto scores = random_values(count * S * S, 52, 3.0f);
    const auto dp = random_values(count * S * S, 53);
    std::vector<float> probs = scores, dp_host = dp;
    for (size_t m = 0; m < count; ++m)
      host_transformer::causal_softmax(probs.data() + m * S * S, S);
    auto scores_d = d.upload(scores), dp_d = d.upload(dp);
    dev::causal_softmax(c, f32, scores_d.data(), count, S);
    const auto device_probs = d.download(scores_d);
    expect_within_ulps(device_probs, probs, special_ulps, "causal softmax");
    // The backward from the same probabilities on both sides: exact everywhere.
    auto probs_d = d.upload(probs);
    for (size_t m = 0; m < count; ++m)
      host_transformer::causal_softmax_backward(probs.data() + m * S * S,
                                                dp_host.data() + m * S * S, S);
    dev::causal_softmax_backward(c, f32, probs_d.data(), dp_d.data(), count, S);
    expect_same_bits(d.download(dp_d), dp_host, "causal softmax backward");
  }
  {
    const size_t rows = 9, V = 13;
    const auto logits = random_values(rows * V, 54, 5.0f);
    std::vector<uint32_t> target(rows);
    for (size_t r = 0; r < rows; ++r) target[r] = static_cast<uint32_t>((r * 5) % V);
    const float factor = static_cast<float>(0.75 / 36.0);
    std::vector<double> row_loss(rows);
    std::vector<float> dlogits(rows * V);
    for (size_t r = 0; r < rows; ++r) {  // transformer.cpp's head
      const float* row = logits.data() + r * V;
      float top = row[0];
      for (size_t v = 1; v < V; ++v) top = std::max(top, row[v]);
      double sum = 0;
      for (size_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v] - top));
      row_loss[r] = std::log(sum) - static_cast<double>(row[target[r]] - top);
      for (size_t v = 0; v < V; ++v) {
        const double prob = std::exp(static_cast<double>(row[v] - top)) / sum;
        dlogits[r * V + v] = static_cast<float>(prob - (v == target[r] ? 1.0 : 0.0)) * factor;
      }
    }
    auto logits_d = d.upload(logits);
    auto target_d = d.upload(target);
    dev::DeviceBuffer<double> loss_d(d.allocator, rows);
    dev::DeviceBuffer<float> dlogits_d(d.allocator, rows * V);
    dev::cross_entropy(c, f32, logits_d.data(), target_d.data(), loss_d.data(), dlogits_d.data(),
                       rows, V, factor);
    const auto device_loss = d.download(loss_d);
    for (size_t r = 0; r < rows; ++r)
      if (g_standin)
        EXPECT_EQ(device_loss[r], row_loss[r]) << "cross-entropy row " << r;
      else
        EXPECT_NEAR(device_loss[r], row_loss[r], 1e-14 * std::fabs(row_loss[r])) << r;
    expect_within_ulps(d.download(dlogits_d), dlogits, g_standin ? 0 : 2, "cross-entropy gradient");
  }
  {
    const size_t rows = 5, cols = 11;
    const auto x = random_values(rows * cols, 55), y = random_values(rows * cols, 56);
    const auto bias = random_values(cols, 57);
    std::vector<float> out(rows * cols);
    for (size_t i = 0; i < out.size(); ++i) {
      float p = y[i];
      p += bias[i % cols];  // add_bias, then the residual
      out[i] = x[i] + p;
    }
    auto x_d = d.upload(x), y_d = d.upload(y), bias_d = d.upload(bias);
    dev::DeviceBuffer<float> out_d(d.allocator, rows * cols);
    dev::bias_residual(c, f32, x_d.data(), y_d.data(), bias_d.data(), out_d.data(), rows, cols);
    expect_same_bits(d.download(out_d), out, "bias + residual");
  }
}

// The device transformer's micro-batch against transformer.cpp's (the host
// model itself, over OpenBLAS): the loss and every gradient, accumulated onto
// a first micro-batch's, within the GEMMs' summation order; with either
// recomputation (the same arithmetic again), and in bf16 and fp16 (the same
// rounding points: the first micro-batch's loss to the bit).
TEST_F(DeviceOps, DeviceTransformerMatchesTheHostModel) {
  tp::TransformerShape shape;
  shape.vocab = 11;
  shape.seq_len = 6;
  shape.hidden = 16;
  shape.heads = 2;
  shape.layers = 2;
  const size_t batch = 3, batch_total = 6;
  const tp::TransformerLayout layout = tp::transformer_layout(shape);
  const std::vector<float> initial = tp::transformer_initial_parameters(shape, 9);
  const tp::TokenDataset data = tp::make_token_dataset(2 * batch, shape, 9);
  const std::vector<size_t> first = {4, 0, 2}, second = {1, 5, 3};
  const auto seq1 = tp::gather_sequences(data, first), seq2 = tp::gather_sequences(data, second);
  struct Case {
    Precision precision;
    tp::Recompute recompute;
    double gradient_tolerance;  // of the largest gradient
  };
  for (const Case& k : {Case{Precision::kFloat32, tp::Recompute::kNone, 1e-4},
                        Case{Precision::kFloat32, tp::Recompute::kFull, 1e-4},
                        Case{Precision::kFloat32, tp::Recompute::kSelective, 1e-4},
                        Case{Precision::kBFloat16, tp::Recompute::kNone, 1e-2},
                        Case{Precision::kFloat16, tp::Recompute::kSelective, 1e-3}}) {
    const std::string what =
        std::string(tp::name(k.precision)) + ", recompute " + std::string(tp::name(k.recompute));
    std::vector<float> params = initial;
    tp::round_to(k.precision, params);
    std::vector<float> grads(layout.total, 0.0f);
    const tp::TransformerParallel parallel{1, 0, false, k.recompute};
    const tp::Transformer model(shape, k.precision, parallel);
    tp::FlatUnits host_units(layout, params.data(), grads.data());
    const double loss1 =
        model.train_micro_batch(seq1, batch, batch_total, 1.0f, host_units, nullptr);
    const double loss =
        loss1 + model.train_micro_batch(seq2, batch, batch_total, 1.0f, host_units, nullptr);

    auto params_d = d.upload(params);
    dev::DeviceBuffer<float> grads_d(d.allocator, layout.total);
    grads_d.zero(d.stream.get());
    tp::FlatUnits device_units(layout, params_d.data(), grads_d.data());
    dev::DeviceTransformer device_model(d.allocator, shape, layout, parallel, k.precision, nullptr,
                                        batch);
    const dev::Context c = d.context();
    const double device_loss1 =
        device_model.micro_batch(c, seq1, batch, batch_total, 1.0f, device_units);
    if (k.precision != Precision::kFloat32) EXPECT_EQ(device_loss1, loss1) << what;
    const double device_loss =
        device_loss1 + device_model.micro_batch(c, seq2, batch, batch_total, 1.0f, device_units);
    EXPECT_NEAR(device_loss, loss, 1e-6 * loss) << what;
    const auto device_grads = d.download(grads_d);
    float largest = 0;
    for (float g : grads) largest = std::max(largest, std::fabs(g));
    ASSERT_GT(largest, 0.0f);
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < grads.size(); ++i) {
      const double off = std::fabs(device_grads[i] - grads[i]);
      worst = std::max(worst, off / largest);
      if (!(off <= k.gradient_tolerance * largest) && bad++ < 5)
        ADD_FAILURE() << what << ": gradient " << i << ": device " << device_grads[i] << " host "
                      << grads[i];
    }
    EXPECT_EQ(bad, 0u) << what;
    std::printf("%s: loss %.3g from the host model's, gradients %.3g of the largest\n",
                what.c_str(), std::fabs(device_loss - loss) / loss, worst);
  }
}

// A CUDA graph captured once replays its kernels at each launch (the -G path
// the engine may take): an SGD step captured, launched three times.
TEST_F(DeviceOps, ACapturedGraphReplaysItsKernels) {
  const size_t n = 2000;
  std::vector<float> params = random_values(n, 30);
  const auto grads = random_values(n, 31, 0.1f);
  auto params_d = d.upload(params);
  auto grads_d = d.upload(grads);
  tp::OptimizerOptions sgd;
  sgd.kind = tp::OptimizerKind::kSgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.0;
  dev::DeviceOptimizer optimizer(d.allocator, sgd, n, d.stream.get());
  d.stream.synchronize();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(d.stream.get(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  optimizer.step(d.context(), params_d.data(), grads_d.data(), 1);
  ASSERT_EQ(cudaStreamEndCapture(d.stream.get(), &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  // Nothing ran at capture.
  expect_same_bits(d.download(params_d), params, "parameters after capture");
  tp::Optimizer host(sgd, n);
  for (size_t launch = 1; launch <= 3; ++launch) {
    ASSERT_EQ(cudaGraphLaunch(exec, d.stream.get()), cudaSuccess);
    host.step(params, grads, launch);
  }
  expect_same_bits(d.download(params_d), params, "parameters after three launches");
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

// The strictness the stand-in keeps (a GPU would give the same or worse).

TEST_F(DeviceOps, ReadingWithoutSynchronizingSeesStaleDataUnderTheStandIn) {
  if (!g_standin) GTEST_SKIP() << "timing-dependent: proven under the stand-in";
  ASSERT_EQ(setenv("CCSCOPE_STANDIN_STREAM_DELAY_US", "20000", 1), 0);
  dev::Stream slow;  // the stand-in reads the delay when a stream is made
  dev::BlasHandle blas(slow.get());
  unsetenv("CCSCOPE_STANDIN_STREAM_DELAY_US");
  dev::Context c{slow.get(), blas.get(), false};
  const size_t n = 256;
  auto buffer = d.upload(std::vector<float>(n, 3.0f));
  auto bias = d.upload(std::vector<float>(16, 1.0f));
  auto out = d.upload(std::vector<float>(n, 0.0f));
  dev::scale(c, buffer.data(), n, 2.0f);  // cuBLAS on the slow stream
  dev::bias_activation(c, Precision::kFloat32, Activation::kRelu, buffer.data(), bias.data(),
                       out.data(), nullptr, 16, 16);  // a kernel on the slow stream
  // Read through another stream (cudaMemcpy: the default stream, which a
  // non-blocking stream does not wait for) before synchronizing the slow one.
  float scaled = -1, activated = -1;
  ASSERT_EQ(cudaMemcpy(&scaled, buffer.data(), 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&activated, out.data(), 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(scaled, 3.0f) << "cuBLAS ran before its stream got there";
  EXPECT_EQ(activated, 0.0f) << "the kernel ran before its stream got there";
  std::vector<float> result(n, -1.0f);
  out.download(result, slow.get());
  EXPECT_EQ(result[0], -1.0f) << "the copy was done before the stream was synchronized";
  slow.synchronize();
  EXPECT_EQ(result[0], 7.0f);  // 3 * 2 + 1
  EXPECT_EQ(result[n - 1], 7.0f);
}

TEST_F(DeviceOps, AnEventOrdersWorkAcrossStreams) {
  // DDP's reducer pattern: the communication stream waits for the compute
  // stream's event before reading the gradients. The compute stream is slow
  // under the stand-in, so without the wait the copy would read stale data.
  if (g_standin) {
    ASSERT_EQ(setenv("CCSCOPE_STANDIN_STREAM_DELAY_US", "20000", 1), 0);
  }
  dev::Stream compute;
  dev::BlasHandle blas(compute.get());
  unsetenv("CCSCOPE_STANDIN_STREAM_DELAY_US");
  dev::Stream communication;
  const size_t n = 1024;
  auto grads = d.upload(std::vector<float>(n, 1.5f));
  dev::scale({compute.get(), blas.get(), false}, grads.data(), n, 4.0f);
  dev::Event ready;
  ready.record(compute.get());
  ready.wait_on(communication.get());
  std::vector<float> host(n, -1.0f);
  grads.download(host, communication.get());
  communication.synchronize();
  EXPECT_EQ(host[0], 6.0f);
  EXPECT_EQ(host[n - 1], 6.0f);
  ready.synchronize();
}

TEST_F(DeviceOps, AHostPointerModeResultInACaptureIsRefused) {
  if (!g_standin)
    GTEST_SKIP() << "what cuBLAS does here is its own (the stand-in would wait forever)";
  auto x = d.upload(std::vector<float>(16, 1.0f));
  float result = -1;
  ASSERT_EQ(cudaStreamBeginCapture(d.stream.get(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cublasSdot(d.blas.get(), 16, x.data(), 1, x.data(), 1, &result),
            CUBLAS_STATUS_NOT_SUPPORTED);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(d.stream.get(), &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(result, -1.0f);
}

TEST_F(DeviceOps, KernelArgumentsMustBeDeviceMemory) {
  if (!g_standin)
    GTEST_SKIP() << "on a GPU a host pointer faults the context (cudaErrorIllegalAddress)";
  std::vector<float> host(100, 1.0f);
  EXPECT_EQ(dev::launch::round(d.stream.get(), host.data(), host.size(), 1),
            cudaErrorIllegalAddress);
  // And cuBLAS's operands.
  auto a = d.upload(std::vector<float>(64, 1.0f));
  const float one = 1.0f, zero = 0.0f;
  EXPECT_EQ(cublasGemmEx(d.blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, host.data(),
                         CUDA_R_32F, 8, a.data(), CUDA_R_32F, 8, &zero, a.data(), CUDA_R_32F, 8,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  // A matrix larger than its allocation.
  EXPECT_EQ(cublasGemmEx(d.blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 9, &one, a.data(),
                         CUDA_R_32F, 8, a.data(), CUDA_R_32F, 9, &zero, a.data(), CUDA_R_32F, 8,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
}

}  // namespace

extern "C" cudaError_t ccscope_test_launch_unemulated(float* values, size_t n, cudaStream_t stream);

namespace {

TEST_F(DeviceOps, AKernelWithoutEmulationFailsLoudly) {
  auto values = d.upload(std::vector<float>(64, 1.0f));
  const cudaError_t e = ccscope_test_launch_unemulated(values.data(), 64, d.stream.get());
  if (g_standin) {
    EXPECT_EQ(e, cudaErrorInvalidDeviceFunction);
    (void)cudaGetLastError();
  } else {
    ASSERT_EQ(e, cudaSuccess);  // a GPU runs it: values += 1
    EXPECT_EQ(d.download(values)[5], 2.0f);
  }
}

}  // namespace

// --standin: must run on the stand-in; --gpu: on a real GPU. Either skips
// (exit 77) where there is no device at all.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const bool want_standin = argc > 1 && std::string(argv[1]) == "--standin";
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return 1;
  g_standin = std::string(prop.name).rfind("ccscope stand-in", 0) == 0;
  if (want_standin != g_standin) {
    std::printf("skipped: %s wants %s, found '%s'\n", argv[1] ? argv[1] : "",
                want_standin ? "the stand-in" : "a GPU", prop.name);
    return want_standin ? 1 : 77;  // the stand-in must be there when asked for
  }
  std::printf("device: %s\n", prop.name);
  return RUN_ALL_TESTS();
}

#include "ccscope/training_probe/model.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "ccscope/collectives/types.h"
#include "ccscope/training_probe/data.h"

namespace ccscope::training_probe {

std::string_view name(Activation activation) {
  return activation == Activation::kRelu ? "relu" : "tanh";
}

std::string_view name(Precision precision) {
  switch (precision) {
    case Precision::kFloat32:
      return "fp32";
    case Precision::kBFloat16:
      return "bf16";
    case Precision::kFloat16:
      return "fp16";
  }
  return "?";
}

std::string_view name(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

size_t element_bytes(Precision precision) { return precision == Precision::kFloat32 ? 4 : 2; }

std::vector<LayerSlice> layer_slices(const ModelShape& shape) {
  std::vector<LayerSlice> slices;
  size_t offset = 0;
  for (size_t l = 0; l < shape.depth; ++l) {
    LayerSlice s;
    s.weight_offset = offset;
    s.weight_count = shape.width * shape.width;
    s.bias_offset = offset + s.weight_count;
    s.bias_count = shape.width;
    offset = s.end();
    slices.push_back(s);
  }
  return slices;
}

size_t parameter_count(const ModelShape& shape) {
  return shape.depth * (shape.width * shape.width + shape.width);
}

std::vector<float> initial_parameters(const ModelShape& shape, uint64_t seed) {
  std::vector<float> parameters(parameter_count(shape));
  const float bound = 1.0f / std::sqrt(static_cast<float>(shape.width));
  // A stream of its own (seed + 1000003), apart from the data's.
  for (size_t i = 0; i < parameters.size(); ++i)
    parameters[i] = bound * uniform_pm1(seed + 1000003, i);
  return parameters;
}

float round_to(Precision precision, float value) {
  switch (precision) {
    case Precision::kFloat32:
      return value;
    case Precision::kBFloat16:
      return bfloat16_to_float(float_to_bfloat16(value));
    case Precision::kFloat16:
      return half_to_float(float_to_half(value));
  }
  return value;
}

void round_to(Precision precision, std::span<float> values) {
  if (precision == Precision::kFloat32) return;
  for (float& v : values) v = round_to(precision, v);
}

void set_compute_threads(int threads) { openblas_set_num_threads(threads); }

void linear_forward(std::span<const float> x, size_t batch, size_t in, size_t out,
                    const float* weight, const float* bias, float* y) {
  for (size_t r = 0; r < batch; ++r) std::memcpy(y + r * out, bias, out * sizeof(float));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(batch),
              static_cast<int>(out), static_cast<int>(in), 1.0f, x.data(), static_cast<int>(in),
              weight, static_cast<int>(in), 1.0f, y, static_cast<int>(out));
}

void linear_backward(std::span<const float> x, std::span<const float> dy, size_t batch, size_t in,
                     size_t out, const float* weight, float* weight_grad, float* bias_grad,
                     float* dx) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(out), static_cast<int>(in),
              static_cast<int>(batch), 1.0f, dy.data(), static_cast<int>(out), x.data(),
              static_cast<int>(in), 1.0f, weight_grad, static_cast<int>(in));
  for (size_t r = 0; r < batch; ++r)
    for (size_t c = 0; c < out; ++c) bias_grad[c] += dy[r * out + c];
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(batch),
                static_cast<int>(in), static_cast<int>(out), 1.0f, dy.data(), static_cast<int>(out),
                weight, static_cast<int>(in), 0.0f, dx, static_cast<int>(in));
}

Model::Model(ModelShape shape, Precision precision)
    : shape_(shape),
      precision_(precision),
      slices_(layer_slices(shape)),
      parameter_count_(training_probe::parameter_count(shape)) {
  if (shape.width == 0 || shape.depth == 0)
    throw std::invalid_argument("model width and depth must be at least 1");
}

void Model::begin_forward(std::span<const float> x, size_t batch, ForwardCache& cache) const {
  cache.batch = batch;
  cache.inputs.resize(shape_.depth);
  cache.preactivations.resize(shape_.depth);
  cache.inputs[0].assign(x.begin(), x.end());
  round_to(precision_, cache.inputs[0]);
}

void Model::forward_layer(size_t layer, const float* parameters, ForwardCache& cache) const {
  const size_t w = shape_.width;
  const size_t batch = cache.batch;
  std::vector<float>& pre = cache.preactivations[layer];
  pre.resize(batch * w);
  linear_forward(cache.inputs[layer], batch, w, w, parameters, parameters + w * w, pre.data());
  round_to(precision_, pre);
  std::vector<float>& next = layer + 1 < shape_.depth ? cache.inputs[layer + 1] : cache.output;
  next.resize(batch * w);
  if (layer + 1 == shape_.depth) {
    next = pre;  // no nonlinearity after the last layer
    return;
  }
  activate(shape_.activation, precision_, pre, next);
}

void activate(Activation activation, Precision precision, std::span<const float> pre,
              std::vector<float>& out) {
  out.resize(pre.size());
  if (activation == Activation::kRelu) {
    for (size_t i = 0; i < pre.size(); ++i) out[i] = pre[i] > 0 ? pre[i] : 0.0f;
  } else {
    for (size_t i = 0; i < pre.size(); ++i) out[i] = std::tanh(pre[i]);
    round_to(precision, out);
  }
}

void activation_backward(Activation activation, Precision precision, std::span<const float> pre,
                         std::span<const float> out, std::span<float> grad) {
  if (activation == Activation::kRelu) {
    for (size_t i = 0; i < grad.size(); ++i)
      if (pre[i] <= 0) grad[i] = 0.0f;
  } else {
    for (size_t i = 0; i < grad.size(); ++i) grad[i] *= 1.0f - out[i] * out[i];
    round_to(precision, grad);
  }
}

void Model::backward_layer(size_t layer, const float* parameters, const ForwardCache& cache,
                           std::vector<float>& grad_output, float* gradients) const {
  const size_t w = shape_.width;
  const size_t batch = cache.batch;
  if (layer + 1 < shape_.depth)  // through the nonlinearity: d pre = d out * f'(pre)
    activation_backward(shape_.activation, precision_, cache.preactivations[layer],
                        cache.inputs[layer + 1], grad_output);
  std::vector<float> grad_input;
  if (layer > 0) grad_input.resize(batch * w);
  linear_backward(cache.inputs[layer], grad_output, batch, w, w, parameters, gradients,
                  gradients + w * w, layer > 0 ? grad_input.data() : nullptr);
  round_to(precision_, {gradients, w * w + w});
  round_to(precision_, grad_input);
  grad_output = std::move(grad_input);
}

void Model::forward(std::span<const float> parameters, std::span<const float> x, size_t batch,
                    ForwardCache& cache) const {
  begin_forward(x, batch, cache);
  for (size_t l = 0; l < shape_.depth; ++l)
    forward_layer(l, parameters.data() + slices_[l].begin(), cache);
}

double mse_loss(std::span<const float> output, std::span<const float> target, size_t batch,
                size_t width, size_t batch_total, float grad_scale, std::vector<float>& grad) {
  grad.resize(batch * width);
  const double denominator = static_cast<double>(batch_total) * static_cast<double>(width);
  const float factor = static_cast<float>(2.0 / denominator) * grad_scale;
  double sum = 0;
  for (size_t i = 0; i < batch * width; ++i) {
    const float diff = output[i] - target[i];
    sum += static_cast<double>(diff) * diff;
    grad[i] = factor * diff;
  }
  return sum / denominator;
}

}  // namespace ccscope::training_probe

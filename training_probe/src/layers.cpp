#include "layers.h"

#include <stdexcept>

namespace ccscope::training_probe {

LocalLayer full_layer(size_t layer, size_t width, size_t depth, size_t offset) {
  LocalLayer x;
  x.layer = layer;
  x.shard = {0, width};
  x.offset = offset;
  x.in = x.out = width;
  x.weight_count = width * width;
  x.bias_count = width;
  x.last = layer + 1 == depth;
  return x;
}

double LayerCache::bytes(size_t element) const {
  size_t n = 0;
  for (const auto* v : {&inputs, &pre, &outs})
    for (const auto& x : *v) n += x.size();
  return static_cast<double>(n * element);
}

void LayerHooks::tensor_all_reduce(std::vector<float>&, bool, StepFigures&) {
  throw std::logic_error("a tensor-parallel layer without a tensor group");
}

std::vector<float> LayerHooks::mixture_forward(const LocalLayer&, std::vector<float>,
                                               StepFigures&) {
  throw std::logic_error("a mixture layer without experts");
}

std::vector<float> LayerHooks::mixture_backward(const LocalLayer&, std::vector<float>,
                                                StepFigures&) {
  throw std::logic_error("a mixture layer without experts");
}

std::vector<float> forward_layers(std::span<const LocalLayer> layers, std::vector<float> x,
                                  const LayerPass& pass, LayerCache& cache, LayerHooks& hooks,
                                  StepFigures& f) {
  for (const LocalLayer& layer : layers) {
    if (layer.role == LayerRole::kMixture) {
      for (auto* v : {&cache.inputs, &cache.pre, &cache.outs}) v->emplace_back();
      x = hooks.mixture_forward(layer, std::move(x), f);
      continue;
    }
    cache.inputs.push_back(std::move(x));
    const std::vector<float>& in = cache.inputs.back();
    const float* weight = hooks.forward_parameters(layer);
    const float* bias = weight + layer.weight_count;
    std::vector<float> pre(pass.batch * layer.out);
    if (layer.role == LayerRole::kRow) {
      // Partial sums over this rank's input features: summed, then the bias added once.
      const std::vector<float> zero_bias(layer.out, 0.0f);
      linear_forward(in, pass.batch, layer.in, layer.out, weight, zero_bias.data(), pre.data());
      hooks.tensor_all_reduce(pre, false, f);
      for (size_t r = 0; r < pass.batch; ++r)
        for (size_t i = 0; i < layer.out; ++i) pre[r * layer.out + i] += bias[i];
    } else {
      linear_forward(in, pass.batch, layer.in, layer.out, weight, bias, pre.data());
    }
    round_to(pass.precision, pre);
    std::vector<float> out;
    if (layer.last)
      out = pre;  // no nonlinearity after the model's last layer
    else
      activate(pass.activation, pass.precision, pre, out);
    hooks.after_forward(layer);
    cache.pre.push_back(std::move(pre));
    cache.outs.push_back(out);
    x = std::move(out);
  }
  return x;
}

std::vector<float> backward_layers(std::span<const LocalLayer> layers, std::vector<float> grad,
                                   const LayerPass& pass, const LayerCache& cache,
                                   LayerHooks& hooks, StepFigures& f) {
  for (size_t i = layers.size(); i-- > 0;) {
    const LocalLayer& layer = layers[i];
    if (layer.role == LayerRole::kMixture) {
      grad = hooks.mixture_backward(layer, std::move(grad), f);
      continue;
    }
    if (!layer.last)
      activation_backward(pass.activation, pass.precision, cache.pre[i], cache.outs[i], grad);
    const float* weight = hooks.backward_parameters(layer);
    float* weight_grad = hooks.gradients(layer);
    float* bias_grad = weight_grad + layer.weight_count;
    const bool needs_input_grad = layer.layer > 0;  // nobody needs the data's gradient
    std::vector<float> grad_input;
    if (needs_input_grad) grad_input.resize(pass.batch * layer.in);
    linear_backward(cache.inputs[i], grad, pass.batch, layer.in, layer.out, weight, weight_grad,
                    bias_grad, needs_input_grad ? grad_input.data() : nullptr);
    round_to(pass.precision, {weight_grad, layer.weight_count + layer.bias_count});
    if (layer.role == LayerRole::kColumn && needs_input_grad)
      hooks.tensor_all_reduce(grad_input, true, f);
    round_to(pass.precision, grad_input);
    hooks.after_backward(layer);
    grad = std::move(grad_input);
  }
  return grad;
}

}  // namespace ccscope::training_probe

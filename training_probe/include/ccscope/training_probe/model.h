#pragma once
// The probe's model: a stack of linear layers (PyTorch nn.Linear layout,
// weight [out x in] row-major, then bias [out]) with a nonlinearity between
// them, trained on a mean-squared-error loss. Every parameter lives in one
// flat float vector in layer order (W0, b0, W1, b1, ...), so that DDP buckets
// and ZeRO shards are plain ranges of it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ccscope::training_probe {

enum class Activation { kRelu, kTanh };
// The number format compute runs in. kFloat32 is exact float32; kBFloat16 and
// kFloat16 round weights, activations and gradients to the format after every
// operation (the CPU path emulates them: OpenBLAS has no 16-bit GEMM), with
// float32 accumulation inside each GEMM as tensor cores do.
enum class Precision { kFloat32, kBFloat16, kFloat16 };
// Activation recomputation (Korthikanti et al. 2022): none keeps every
// layer's activations; selective drops the attention core's (the s^2
// probabilities) and recomputes softmax(QK^T) in backward; full keeps each
// layer's input and reruns its forward in backward.
enum class Recompute { kNone, kSelective, kFull };
std::string_view name(Activation activation);
std::string_view name(Precision precision);
// "none", "selective", "full"
std::string_view name(Recompute recompute);
size_t element_bytes(Precision precision);  // 4 or 2

struct ModelShape {
  size_t width = 256;  // every layer's input and output features
  size_t depth = 4;    // linear layers
  Activation activation = Activation::kRelu;
};

// Where one layer's weight and bias sit in the flat parameter vector.
struct LayerSlice {
  size_t weight_offset = 0;
  size_t weight_count = 0;  // out x in
  size_t bias_offset = 0;
  size_t bias_count = 0;
  size_t begin() const { return weight_offset; }
  size_t end() const { return bias_offset + bias_count; }
};

std::vector<LayerSlice> layer_slices(const ModelShape& shape);
size_t parameter_count(const ModelShape& shape);

// Kaiming-uniform-like initial weights from `seed` (nn.Linear's default
// bounds: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias).
std::vector<float> initial_parameters(const ModelShape& shape, uint64_t seed);

// Rounds every element to `precision` in place (no-op for float32).
void round_to(Precision precision, std::span<float> values);
float round_to(Precision precision, float value);

// Threads each GEMM may use (openblas_set_num_threads); the probe runs one
// per rank by default, as the speed comparisons do.
void set_compute_threads(int threads);

// The nonlinearity between layers: out = f(pre) (tanh rounded to the format),
// and its backward in place: grad (d out) becomes d pre, from pre and out.
void activate(Activation activation, Precision precision, std::span<const float> pre,
              std::vector<float>& out);
void activation_backward(Activation activation, Precision precision, std::span<const float> pre,
                         std::span<const float> out, std::span<float> grad);

// Activations of one forward pass, kept for backward.
struct ForwardCache {
  size_t batch = 0;
  std::vector<std::vector<float>> inputs;          // input of layer l, [batch x width]
  std::vector<std::vector<float>> preactivations;  // output of layer l before the nonlinearity
  std::vector<float> output;                       // the model's output [batch x width]
};

// One layer: y = x W^T + b over OpenBLAS (cblas_sgemm).
void linear_forward(std::span<const float> x, size_t batch, size_t in, size_t out,
                    const float* weight, const float* bias, float* y);
// dW += dy^T x, db += column sums of dy, dx = dy W (dx may be null for layer 0).
void linear_backward(std::span<const float> x, std::span<const float> dy, size_t batch, size_t in,
                     size_t out, const float* weight, float* weight_grad, float* bias_grad,
                     float* dx);

// The model's forward over a batch `x` [batch x width]. `layer_parameters(l)`
// points at layer l's weight then bias (contiguous, as layer_slices lays them);
// ZeRO-3 hands in each layer as it is gathered.
class Model {
 public:
  Model(ModelShape shape, Precision precision);
  const ModelShape& shape() const { return shape_; }
  const std::vector<LayerSlice>& slices() const { return slices_; }
  size_t parameter_count() const { return parameter_count_; }

  // Layer `layer` of a forward pass: cache.inputs[layer] must hold its input.
  void forward_layer(size_t layer, const float* parameters, ForwardCache& cache) const;
  // Layer `layer` of backward: `grad_output` is d loss / d output of the layer
  // (after the nonlinearity); on return it holds d loss / d input of the layer.
  // Adds the layer's gradients to `gradients` (its weight then bias).
  void backward_layer(size_t layer, const float* parameters, const ForwardCache& cache,
                      std::vector<float>& grad_output, float* gradients) const;
  // Starts a pass: copies `x` into cache.inputs[0].
  void begin_forward(std::span<const float> x, size_t batch, ForwardCache& cache) const;

  // Whole passes over the flat vector (the single and DDP strategies).
  void forward(std::span<const float> parameters, std::span<const float> x, size_t batch,
               ForwardCache& cache) const;

 private:
  ModelShape shape_;
  Precision precision_;
  std::vector<LayerSlice> slices_;
  size_t parameter_count_;
};

// Mean squared error over the batch and features, scaled by `scale` / (the
// number of ranks' worth of samples it stands for): loss = sum (y-t)^2 /
// (batch_total * width). Returns the loss of this batch's share and writes
// d loss / d output (times `grad_scale`, fp16's loss scale) into `grad`.
double mse_loss(std::span<const float> output, std::span<const float> target, size_t batch,
                size_t width, size_t batch_total, float grad_scale, std::vector<float>& grad);

}  // namespace ccscope::training_probe

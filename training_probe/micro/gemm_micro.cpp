// Micro-benchmarks of the training probe's compute (Google Benchmark): the
// three GEMM calls the probe makes per linear layer, exactly as
// training_probe/src/model.cpp makes them, against OpenBLAS's best layout for
// the same M, N, K (all four transpose combinations), plus the probe's layer
// passes and elementwise kernels (optimizer steps, 16-bit rounding, the loss).
// One OpenBLAS thread, as the probe runs one per rank by default.
//
// Names (training_probe/scripts/gemm-throughput reads them):
//   gemm/probe/<call>/<batch>x<width>           the probe's call
//   gemm/openblas/<call>/<NN|NT|TN|TT>/<batch>x<width>
//                                               the same M, N, K and beta, each layout
// with <call> forward (y = x W^T), weight_grad (dW += dy^T x), input_grad (dx = dy W).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/optimizer.h"

namespace tp = ccscope::training_probe;

namespace {

struct Shape {
  size_t batch;
  size_t width;
};
// (32, 1024) is the per-rank batch of a global batch of 128 over 4 ranks.
const Shape kShapes[] = {{64, 1024}, {128, 1024}, {32, 1024}, {128, 256}, {128, 4096}};

std::vector<float> random_floats(size_t n, uint64_t seed) {
  // A small xorshift: values in [-1, 1), no zeros or denormals to skew timing.
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v[i] = static_cast<float>(static_cast<double>(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    if (v[i] == 0.0f) v[i] = 0.5f;
  }
  return v;
}

std::string shape_name(const Shape& shape) {
  return std::to_string(shape.batch) + "x" + std::to_string(shape.width);
}

void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.counters["flops"] = benchmark::Counter(
      flops_per_iteration * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// ---- The probe's three GEMM calls (arguments as in model.cpp's linear_forward
// and linear_backward, layer width w: in = out = w).

enum class Call { kForward, kWeightGrad, kInputGrad };
const char* call_name(Call call) {
  switch (call) {
    case Call::kForward:
      return "forward";
    case Call::kWeightGrad:
      return "weight_grad";
    case Call::kInputGrad:
      return "input_grad";
  }
  return "?";
}

// C[M x N] = A B: the call's M, N, K and beta.
struct Gemm {
  int m, n, k;
  float beta;
};
Gemm gemm_of(Call call, const Shape& shape) {
  const int b = static_cast<int>(shape.batch), w = static_cast<int>(shape.width);
  switch (call) {
    case Call::kForward:
      return {b, w, w, 1.0f};  // y[b x out] (= bias) += x[b x in] W^T
    case Call::kWeightGrad:
      return {w, w, b, 1.0f};  // dW[out x in] += dy^T[out x b] x[b x in]
    case Call::kInputGrad:
      return {b, w, w, 0.0f};  // dx[b x in] = dy[b x out] W[out x in]
  }
  return {};
}

void probe_gemm(benchmark::State& state, Call call, Shape shape) {
  const int b = static_cast<int>(shape.batch), in = static_cast<int>(shape.width),
            out = static_cast<int>(shape.width);
  const std::vector<float> x = random_floats(shape.batch * shape.width, 1);
  const std::vector<float> dy = random_floats(shape.batch * shape.width, 2);
  const std::vector<float> weight = random_floats(shape.width * shape.width, 3);
  std::vector<float> y(shape.batch * shape.width, 0.0f);
  std::vector<float> weight_grad(shape.width * shape.width, 0.0f);
  std::vector<float> dx(shape.batch * shape.width, 0.0f);
  for (auto _ : state) {
    switch (call) {
      case Call::kForward:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, out, in, 1.0f, x.data(), in,
                    weight.data(), in, 1.0f, y.data(), out);
        benchmark::DoNotOptimize(y.data());
        break;
      case Call::kWeightGrad:
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, b, 1.0f, dy.data(), out,
                    x.data(), in, 1.0f, weight_grad.data(), in);
        benchmark::DoNotOptimize(weight_grad.data());
        break;
      case Call::kInputGrad:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, in, out, 1.0f, dy.data(), out,
                    weight.data(), in, 0.0f, dx.data(), in);
        benchmark::DoNotOptimize(dx.data());
        break;
    }
    benchmark::ClobberMemory();
  }
  const Gemm g = gemm_of(call, shape);
  set_flops(state, 2.0 * g.m * g.n * g.k);
  state.SetLabel(call == Call::kForward ? "NT" : call == Call::kWeightGrad ? "TN" : "NN");
}

// ---- OpenBLAS's own best for the same M, N, K, beta: row-major C[M x N] =
// op(A) op(B), A stored [M x K] (N) or [K x M] (T), B stored [K x N] (N) or
// [N x K] (T). Column-major is the same four with the operands swapped.
void openblas_gemm(benchmark::State& state, Call call, Shape shape, bool trans_a, bool trans_b) {
  const Gemm g = gemm_of(call, shape);
  const std::vector<float> a = random_floats(static_cast<size_t>(g.m) * g.k, 1);
  const std::vector<float> bm = random_floats(static_cast<size_t>(g.k) * g.n, 2);
  std::vector<float> c(static_cast<size_t>(g.m) * g.n, 0.0f);
  const int lda = trans_a ? g.m : g.k;
  const int ldb = trans_b ? g.k : g.n;
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, a.data(), lda, bm.data(),
                ldb, g.beta, c.data(), g.n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * g.m * g.n * g.k);
  state.SetLabel(std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N"));
}

// ---- The probe's functions themselves.

void linear_forward(benchmark::State& state, Shape shape) {
  const size_t w = shape.width;
  const std::vector<float> x = random_floats(shape.batch * w, 1);
  const std::vector<float> weight = random_floats(w * w, 3);
  const std::vector<float> bias = random_floats(w, 4);
  std::vector<float> y(shape.batch * w);
  for (auto _ : state) {
    tp::linear_forward(x, shape.batch, w, w, weight.data(), bias.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * shape.batch * w * w);
}

void linear_backward(benchmark::State& state, Shape shape) {
  const size_t w = shape.width;
  const std::vector<float> x = random_floats(shape.batch * w, 1);
  const std::vector<float> dy = random_floats(shape.batch * w, 2);
  const std::vector<float> weight = random_floats(w * w, 3);
  std::vector<float> weight_grad(w * w, 0.0f), bias_grad(w, 0.0f), dx(shape.batch * w);
  for (auto _ : state) {
    tp::linear_backward(x, dy, shape.batch, w, w, weight.data(), weight_grad.data(),
                        bias_grad.data(), dx.data());
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 4.0 * shape.batch * w * w);
}

// Model::forward_layer / backward_layer of a middle layer (ReLU after it) of a
// 3-layer model, in fp32 or bf16 (rounding after every operation).
void model_forward_layer(benchmark::State& state, Shape shape, tp::Precision precision) {
  const tp::ModelShape model_shape{shape.width, 3, tp::Activation::kRelu};
  const tp::Model model(model_shape, precision);
  const std::vector<float> parameters = tp::initial_parameters(model_shape, 7);
  const std::vector<float> x = random_floats(shape.batch * shape.width, 1);
  tp::ForwardCache cache;
  model.forward(parameters, x, shape.batch, cache);
  const float* layer = parameters.data() + model.slices()[1].begin();
  for (auto _ : state) {
    model.forward_layer(1, layer, cache);
    benchmark::DoNotOptimize(cache.inputs[2].data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * shape.batch * shape.width * shape.width);
}

void model_backward_layer(benchmark::State& state, Shape shape, tp::Precision precision) {
  const tp::ModelShape model_shape{shape.width, 3, tp::Activation::kRelu};
  const tp::Model model(model_shape, precision);
  const std::vector<float> parameters = tp::initial_parameters(model_shape, 7);
  const std::vector<float> x = random_floats(shape.batch * shape.width, 1);
  tp::ForwardCache cache;
  model.forward(parameters, x, shape.batch, cache);
  const tp::LayerSlice& slice = model.slices()[1];
  std::vector<float> gradients(slice.end() - slice.begin(), 0.0f);
  const std::vector<float> grad_output = random_floats(shape.batch * shape.width, 2);
  std::vector<float> grad(grad_output.size());
  for (auto _ : state) {
    // backward_layer replaces grad with d loss / d input: the same d output
    // every iteration (a copy, small beside the two GEMMs), so that repeated
    // products by W do not drift into denormals.
    grad.assign(grad_output.begin(), grad_output.end());
    model.backward_layer(1, parameters.data() + slice.begin(), cache, grad, gradients.data());
    benchmark::DoNotOptimize(grad.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 4.0 * shape.batch * shape.width * shape.width);
}

// ---- Elementwise kernels.

constexpr size_t kElements = size_t{1} << 20;  // 1M floats

void optimizer_step(benchmark::State& state, tp::OptimizerKind kind) {
  tp::OptimizerOptions options;
  options.kind = kind;
  options.lr = 1e-3;
  options.weight_decay = kind == tp::OptimizerKind::kAdamW ? 0.01 : 0.0;
  tp::Optimizer optimizer(options, kElements);
  std::vector<float> parameters = random_floats(kElements, 5);
  const std::vector<float> gradients = random_floats(kElements, 6);
  size_t step = 0;
  for (auto _ : state) {
    optimizer.step(parameters, gradients, ++step);
    benchmark::DoNotOptimize(parameters.data());
    benchmark::ClobberMemory();
  }
  // Words read and written per element: SGD p, g, buf -> p, buf (5); AdamW
  // p, g, m, v -> p, m, v (7).
  const size_t words = kind == tp::OptimizerKind::kSgd ? 5 : 7;
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kElements));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kElements * words * 4));
}

void round_to(benchmark::State& state, tp::Precision precision) {
  std::vector<float> values = random_floats(kElements, 8);
  for (auto _ : state) {
    tp::round_to(precision, values);
    benchmark::DoNotOptimize(values.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kElements));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kElements * 8));
}

void mse_loss(benchmark::State& state, Shape shape) {
  const size_t n = shape.batch * shape.width;
  const std::vector<float> output = random_floats(n, 9);
  const std::vector<float> target = random_floats(n, 10);
  std::vector<float> grad;
  for (auto _ : state) {
    double loss =
        tp::mse_loss(output, target, shape.batch, shape.width, shape.batch * 4, 1.0f, grad);
    benchmark::DoNotOptimize(loss);
    benchmark::ClobberMemory();
  }
  // output, target -> grad
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * 12));
}

void register_all() {
  const Call calls[] = {Call::kForward, Call::kWeightGrad, Call::kInputGrad};
  for (const Shape& shape : kShapes) {
    const std::string s = shape_name(shape);
    for (Call call : calls) {
      benchmark::RegisterBenchmark(("gemm/probe/" + std::string(call_name(call)) + "/" + s).c_str(),
                                   probe_gemm, call, shape);
      for (int layout = 0; layout < 4; ++layout) {
        const bool ta = layout & 2, tb = layout & 1;
        const std::string l = std::string(ta ? "T" : "N") + (tb ? "T" : "N");
        benchmark::RegisterBenchmark(
            ("gemm/openblas/" + std::string(call_name(call)) + "/" + l + "/" + s).c_str(),
            openblas_gemm, call, shape, ta, tb);
      }
    }
  }
  for (const Shape& shape : kShapes) {
    const std::string s = shape_name(shape);
    benchmark::RegisterBenchmark(("layer/linear_forward/" + s).c_str(), linear_forward, shape);
    benchmark::RegisterBenchmark(("layer/linear_backward/" + s).c_str(), linear_backward, shape);
    for (tp::Precision p : {tp::Precision::kFloat32, tp::Precision::kBFloat16}) {
      const std::string pn(tp::name(p));
      benchmark::RegisterBenchmark(("layer/forward_layer/" + pn + "/" + s).c_str(),
                                   model_forward_layer, shape, p);
      benchmark::RegisterBenchmark(("layer/backward_layer/" + pn + "/" + s).c_str(),
                                   model_backward_layer, shape, p);
    }
  }
  benchmark::RegisterBenchmark("elementwise/sgd_step/1M", optimizer_step, tp::OptimizerKind::kSgd);
  benchmark::RegisterBenchmark("elementwise/adamw_step/1M", optimizer_step,
                               tp::OptimizerKind::kAdamW);
  benchmark::RegisterBenchmark("elementwise/round_to/bf16/1M", round_to, tp::Precision::kBFloat16);
  benchmark::RegisterBenchmark("elementwise/round_to/fp16/1M", round_to, tp::Precision::kFloat16);
  benchmark::RegisterBenchmark("elementwise/mse_loss/1024x1024", mse_loss, Shape{1024, 1024});
  for (const Shape& shape : kShapes)
    benchmark::RegisterBenchmark(("elementwise/mse_loss/" + shape_name(shape)).c_str(), mse_loss,
                                 shape);
}

}  // namespace

int main(int argc, char** argv) {
  tp::set_compute_threads(1);  // openblas_set_num_threads(1): one thread per rank
  {
    // OpenBLAS sets up its buffers on the first call: not in the first benchmark.
    const std::vector<float> a = random_floats(256 * 256, 1);
    std::vector<float> c(256 * 256, 0.0f);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 256, 256, 256, 1.0f, a.data(), 256,
                a.data(), 256, 0.0f, c.data(), 256);
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("openblas_threads", std::to_string(openblas_get_num_threads()));
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  std::string shapes;  // in this order (random interleaving shuffles the report)
  for (const Shape& shape : kShapes) {
    if (!shapes.empty()) shapes += ',';
    shapes += shape_name(shape);
  }
  benchmark::AddCustomContext("gemm_shapes", shapes);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// The GPU path's expert parallelism (trainer.h: train_expert_on_device): the
// host path's mixture-of-experts model (parallel_trainer.cpp's Expert,
// moe_layout.h) with parameters, gradients and activations in device memory.
// Dense layers and each expert's layer are GEMMs through cuBLAS on the compute
// stream; a mixture layer's tokens go to their experts' ranks and come back by
// all-to-all over the device communicator (NCCL: ncclSend/ncclRecv in one
// group, as PyTorch's all_to_all_single with split sizes), four per mixture
// layer and micro-batch (dispatch, combine, and both again backward), on the
// communicator's stream behind events. The replicated parameters' gradients
// are averaged by an all-reduce over it; an expert's gradient is divided by
// the rank count (it sums every rank's tokens).
//
// The gate (E logits per token, softmax, top-k, capacity; its backward) runs
// on the host in double through moe.cpp, the functions the host path runs:
// the split sizes must reach the host before an all-to-all anyway (as
// all_to_all_single's), and so the routing decisions are the host path's
// and the single-GPU reference's bit for bit. Per mixture layer that costs a
// download of its input (micro-batch x width) and gate (experts x width), and
// backward a download and upload of the input gradient and gate gradient.
//
// --offload optimizer: the rank's parameters (the replicated ones and its
// experts') have their fp32 master weights and optimizer state in host memory,
// stepped there (host_offload.h, as under the other strategies).
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/moe.h"
#include "ccscope/training_probe/parallel_trainer.h"
#include "ccscope/training_probe/trainer.h"
#include "device_ops.h"
#include "device_strategy.h"
#include "engine.h"
#include "host_offload.h"
#include "moe_layout.h"
#include "wire.h"

namespace ccscope::training_probe {
namespace {

namespace dev = device;

// One all-to-all's span on the communicator's stream.
struct TimedSpan {
  dev::Event start{true}, end{true};
};

// A mixture layer's routing and what its backward needs from its forward.
struct Mixture {
  // Host: the gate's input and weight as forward used them, its output, and
  // the rows in send order (by the expert each goes to, so by its owner).
  std::vector<float> x, gate_weight;
  GateOutput gate;
  std::vector<Assignment> order;
  std::vector<uint32_t> token_of_row;
  std::vector<float> weight_of_row;
  std::vector<int32_t> row_of_slot;   // [tokens x top_k]: a token's rows in send order, -1 after
  std::vector<float> weight_of_slot;  // their combine weights
  std::vector<size_t> send_counts;    // rows to each peer
  std::vector<size_t> recv_counts;    // rows from each peer
  std::vector<size_t> expert_rows;    // received rows per local expert
  std::vector<uint32_t> received_of_block;  // the received row of each expert-block row
  // Device: the same tables, and the experts' activations in expert-block order.
  dev::DeviceBuffer<uint32_t> token_of_row_d, received_of_block_d;
  dev::DeviceBuffer<float> weight_of_row_d, weight_of_slot_d;
  dev::DeviceBuffer<int32_t> row_of_slot_d;
  dev::DeviceBuffer<float> returned;  // [sent x width] the experts' outputs back
  dev::DeviceBuffer<float> in, pre, out;
  dev::DeviceBuffer<uint16_t> in16;
};

class DeviceExpert final : public StrategyHooks {
 public:
  DeviceExpert(EngineState& state, Communicator* device)
      : s_(state),
        o_(state.options),
        ordinal_(select_device(device)),
        device_(device),
        ranks_(device ? static_cast<size_t>(device->size()) : 1),
        rank_(device ? static_cast<size_t>(device->rank()) : 0),
        w_(o_.shape.width),
        mixed_(state.mixed()),
        moe_{w_, o_.parallel.experts, o_.parallel.top_k, o_.parallel.capacity_factor},
        mine_(experts_of_rank(rank_, ranks_, o_.parallel.experts)),
        blas_(compute_.get()),
        c_{compute_.get(), blas_.get(), o_.tf32} {
    if (device_ != nullptr) {
      comm_stream_ = static_cast<cudaStream_t>(device_->device_stream());
      if (comm_stream_ == nullptr)
        throw UsageError("the GPU path needs a device communicator (nccl), not " +
                         device_->backend_name());
      comm_blas_ = std::make_unique<dev::BlasHandle>(comm_stream_);
      cc_ = {comm_stream_, comm_blas_->get(), false};
    }
    // The host Expert's layout: replicated parameters (dense layers, gates)
    // first, then this rank's experts.
    const MoeLayout layout = moe_layout(o_.shape, moe_.experts);
    parameters_ = layout.total;
    const std::vector<float> full = moe_initial_parameters(layout.total, w_, o_.seed);
    std::vector<float> local;
    auto take = [&](size_t at, size_t n) {
      local.insert(local.end(), full.begin() + static_cast<std::ptrdiff_t>(at),
                   full.begin() + static_cast<std::ptrdiff_t>(at + n));
    };
    for (const MoeLayout::Layer& l : layout.layers) {
      layers_.push_back({l.mixture, local.size(), {}});
      take(l.offset, l.mixture ? moe_.experts * w_ : w_ * w_ + w_);
    }
    replicated_ = local.size();
    for (size_t l = 0; l < layers_.size(); ++l) {
      if (!layers_[l].mixture) continue;
      for (size_t e = mine_.begin; e < mine_.end; ++e) {
        layers_[l].expert_offsets.push_back(local.size());
        take(layout.layers[l].expert_offsets[e], w_ * w_ + w_);
      }
    }
    local_ = local.size();
    params_ = dev::DeviceBuffer<float>(allocator_, local_);
    params_.upload(local, c_.stream);
    dev::round_to(c_, o_.precision, params_.data(), local_);
    if (o_.offload_optimizer) {
      // The master weights from the rounded parameters, as below, on the host
      // (model.cpp's rounding: the device's bit for bit).
      compute_.synchronize();  // `local` is uploaded before it is rounded here
      round_to(o_.precision, local);
      offload_ = std::make_unique<HostOffload>(o_.optimizer, o_.precision, std::move(local));
      if (mixed_) {
        params16_ = dev::DeviceBuffer<uint16_t>(allocator_, local_);
        dev::to_16(c_, o_.precision, params_.data(), params16_.data(), local_);
      }
    } else if (mixed_) {
      // The master copy from the rounded parameters, as the host Expert's.
      master_ = dev::DeviceBuffer<float>(allocator_, local_);
      dev::check(cudaMemcpyAsync(master_.data(), params_.data(), local_ * sizeof(float),
                                 cudaMemcpyDeviceToDevice, c_.stream),
                 "cudaMemcpyAsync device to device");
      params16_ = dev::DeviceBuffer<uint16_t>(allocator_, local_);
      dev::to_16(c_, o_.precision, params_.data(), params16_.data(), local_);
    }
    grads_ = dev::DeviceBuffer<float>(allocator_, local_);
    flag_ = dev::DeviceBuffer<int>(allocator_, 1);
    if (!offload_)
      optimizer_ =
          std::make_unique<dev::DeviceOptimizer>(allocator_, o_.optimizer, local_, c_.stream);
    per_replica_ = o_.global_batch / ranks_;
    micro_ = per_replica_ / o_.micro_batches;
    const size_t n = micro_ * w_, depth = o_.shape.depth;
    batch_inputs_ = dev::DeviceBuffer<float>(allocator_, per_replica_ * w_);
    batch_targets_ = dev::DeviceBuffer<float>(allocator_, per_replica_ * w_);
    for (size_t i = 0; i <= depth; ++i) {
      x_.emplace_back(allocator_, n);
      x16_.emplace_back(allocator_, mixed_ ? n : 0);
      if (i < depth) pre_.emplace_back(allocator_, layers_[i].mixture ? 0 : n);
    }
    mixtures_.resize(depth);
    diff_ = dev::DeviceBuffer<float>(allocator_, n);
    grad_[0] = dev::DeviceBuffer<float>(allocator_, n);
    grad_[1] = dev::DeviceBuffer<float>(allocator_, n);
    dy16_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ ? n : 0);
    compute_.synchronize();  // `local` goes out of scope
  }

  ~DeviceExpert() override {
    // Nothing queued may outlive the buffers it reads and writes.
    if (comm_stream_ != nullptr) (void)cudaStreamSynchronize(comm_stream_);
    (void)cudaStreamSynchronize(compute_.get());
  }

  size_t parameters() const override { return parameters_; }
  size_t communicated() const override { return parameters_; }

  double forward_backward(size_t step, StepFigures& f) override {
    grads_.zero(c_.stream);
    wanted_.assign(moe_.experts, 0.0);
    dropped_ = 0;
    const std::vector<size_t> samples = s_.step_samples(step, ranks_, rank_, per_replica_);
    gather_batch(s_.data, samples, s_.inputs, s_.targets);
    batch_inputs_.upload(s_.inputs, c_.stream);
    dev::round_to(c_, o_.precision, batch_inputs_.data(), batch_inputs_.size());
    batch_targets_.upload(s_.targets, c_.stream);
    compute_.synchronize();  // the host's inputs and targets are free again
    const size_t n = micro_ * w_;
    double loss = 0;
    for (size_t m = 0; m < o_.micro_batches; ++m) {
      copy_on_device(c_, x_[0].data(), batch_inputs_.data() + m * n, n);
      if (mixed_) dev::to_16(c_, o_.precision, x_[0].data(), x16_[0].data(), n);
      for (size_t l = 0; l < layers_.size(); ++l) forward(l, f);
      // The loss synchronizes the compute stream.
      float* grad = grad_[0].data();
      loss += dev::mse_loss(c_, x_.back().data(), batch_targets_.data() + m * n, diff_.data(), grad,
                            micro_, w_, per_replica_, static_cast<float>(f.loss_scale));
      size_t in = 0;  // which of grad_ holds the gradient of the current layer's output
      for (size_t l = layers_.size(); l-- > 0;) {
        if (layers_[l].mixture)
          mixture_backward(l, grad_[in].data(), grad_[in ^ 1].data(), f);
        else
          dense_backward(l, grad_[in].data(), l > 0 ? grad_[in ^ 1].data() : nullptr);
        in ^= 1;
      }
    }
    used_peak_ = std::max(used_peak_, device_bytes_in_use());
    return loss;
  }

  // The replicated parameters' gradients averaged over the ranks (all-reduce
  // in the compute format); each expert's divided by the rank count. Rank 0
  // counts the replicated ones in the global norm, each its own experts.
  ReducedGradients reduce_gradients(StepFigures& f) override {
    if (device_ != nullptr && ranks_ > 1) {
      const float average = 1.0f / static_cast<float>(ranks_);
      ready_.record(c_.stream);
      ready_.wait_on(comm_stream_);
      TimedSpan& timed = next_timed();
      timed.start.record(comm_stream_);
      dev::scale(cc_, grads_.data(), replicated_, average);
      if (mixed_) {
        uint16_t* words = at_least(words_send_, replicated_);
        dev::to_16(cc_, o_.precision, grads_.data(), words, replicated_);
        device_->all_reduce(words, words, replicated_, wire_type(o_.precision), ReduceOp::kSum);
        dev::from_16(cc_, o_.precision, words, grads_.data(), replicated_);
      } else {
        device_->all_reduce(grads_.data(), grads_.data(), replicated_, DataType::kFloat32,
                            ReduceOp::kSum);
      }
      timed.end.record(comm_stream_);
      timed.end.wait_on(c_.stream);
      dev::scale(c_, grads_.data() + replicated_, local_ - replicated_, average);
      f.dp_bytes += all_reduce_bytes(replicated_, ranks_, s_.element);
    }
    std::vector<Range> counted;
    if (rank_ == 0)
      counted.push_back({0, local_});
    else
      counted.push_back({replicated_, local_});
    gradients_ = std::make_unique<DeviceGradients>(c_, grads_.data(), local_, flag_.data(),
                                                   std::move(counted));
    ReducedGradients g;
    g.device = gradients_.get();
    g.disjoint = true;
    return g;
  }

  void apply(std::span<const float>, size_t step, StepFigures& f) override {
    if (offload_) {
      offload_->step(c_, grads_.data(), params16_.data(), params_.data(), step, f);
      if (mixed_) dev::from_16(c_, o_.precision, params16_.data(), params_.data(), local_);
    } else if (mixed_) {
      optimizer_->step(c_, master_.data(), grads_.data(), step);
      dev::round_copy(c_, o_.precision, master_.data(), params_.data(), params16_.data(), local_);
    } else {
      optimizer_->step(c_, params_.data(), grads_.data(), step);
    }
    compute_.synchronize();  // the step's time includes the device's work
  }

  // The all-to-alls' and the all-reduce's time on the communicator's stream,
  // all of it exposed: the compute stream waits for each (an expert needs its
  // tokens, a token its experts' outputs).
  void add_own_communication(CommCounters& counters) override {
    compute_.synchronize();
    step_all_to_all_s_ = 0;
    for (size_t i = 0; i < timed_used_; ++i) {
      const double seconds = elapsed(timed_[i]->start, timed_[i]->end);
      counters.busy_seconds += seconds;
      counters.exposed_seconds += seconds;
      if (i < all_to_alls_) step_all_to_all_s_ += seconds;
    }
    counters.operations += timed_used_;
    timed_used_ = all_to_alls_ = 0;
  }

  double bytes_sent(const StepFigures& f, const CommCounters&) const override {
    return f.ep_bytes + f.dp_bytes;
  }
  double global_loss(double local_loss) override {
    return s_.reduce(local_loss, ReduceOp::kSum) / static_cast<double>(ranks_);
  }

  // Routing figures over every rank (the host Expert's), the all-to-alls' time.
  void add_figures(StepFigures& f) override {
    f.all_to_all_seconds = step_all_to_all_s_;
    add_routing_figures(s_, wanted_, dropped_, f);
  }

  // The replicated parameters agree.
  bool consistent() override {
    std::vector<float> host(replicated_);
    params_.download(host, c_.stream);
    compute_.synchronize();
    return same_on_every_rank(s_, host);
  }

  // The gradients the optimizer took, in the single-rank layout on every rank
  // (the --check-loss gradient check: an expert's gradient barely moves the
  // loss, its gate weight being small beside the residual): each rank's
  // experts, and rank 0's replicated ones, summed with the others' zeros over
  // the host communicator.
  std::vector<float> gathered_gradients(std::span<const float>) override {
    std::vector<float> local(local_), whole(parameters_, 0.0f);
    grads_.download(local, c_.stream);
    compute_.synchronize();
    const MoeLayout layout = moe_layout(o_.shape, moe_.experts);
    const size_t expert_size = w_ * w_ + w_;
    for (size_t l = 0; l < layers_.size(); ++l) {
      const size_t n = layers_[l].mixture ? moe_.experts * w_ : expert_size;
      if (rank_ == 0)
        std::copy_n(local.begin() + static_cast<std::ptrdiff_t>(layers_[l].offset), n,
                    whole.begin() + static_cast<std::ptrdiff_t>(layout.layers[l].offset));
      for (size_t j = 0; j < layers_[l].expert_offsets.size(); ++j)
        std::copy_n(
            local.begin() + static_cast<std::ptrdiff_t>(layers_[l].expert_offsets[j]), expert_size,
            whole.begin() +
                static_cast<std::ptrdiff_t>(layout.layers[l].expert_offsets[mine_.begin + j]));
    }
    if (s_.world != nullptr)
      s_.comm.run(s_.world, 0, nullptr, [&](Communicator& c) {
        c.all_reduce(whole.data(), whole.data(), whole.size(), DataType::kFloat32, ReduceOp::kSum);
      });
    return whole;
  }

  MemoryFootprint memory() const override {
    const double e = static_cast<double>(s_.element), n = static_cast<double>(local_);
    MemoryFootprint m;
    m.parameters = e * n;
    m.gradients = e * n;
    m.optimizer =
        static_cast<double>(offload_ ? offload_->state_bytes() : optimizer_->state_bytes()) +
        (mixed_ ? 4.0 * n : 0.0);
    return m;
  }

  void add_results(TrainResult& result) const override {
    result.device_peak_bytes = static_cast<double>(allocator_.peak_bytes());
    result.device_used_bytes = used_peak_;
  }

 private:
  struct Layer {
    bool mixture = false;
    size_t offset = 0;                   // dense: W then b; mixture: the gate Wg
    std::vector<size_t> expert_offsets;  // this rank's experts: W then b
  };

  static void copy_on_device(const dev::Context& c, float* to, const float* from, size_t n) {
    dev::check(cudaMemcpyAsync(to, from, n * sizeof(float), cudaMemcpyDeviceToDevice, c.stream),
               "cudaMemcpyAsync device to device");
  }
  const void* weights(size_t offset) const {
    return mixed_ ? static_cast<const void*>(params16_.data() + offset) : params_.data() + offset;
  }
  const void* gemm_input(size_t i) const {
    return mixed_ ? static_cast<const void*>(x16_[i].data()) : x_[i].data();
  }
  bool last(size_t l) const { return l + 1 == layers_.size(); }

  void forward(size_t l, StepFigures& f) {
    if (layers_[l].mixture) return mixture_forward(l, f);
    const size_t offset = layers_[l].offset;
    dev::linear_forward(c_, o_.precision, gemm_input(l), weights(offset), pre_[l].data(), micro_,
                        w_, w_);
    dev::bias_activation(c_, o_.precision,
                         last(l) ? std::nullopt : std::optional(o_.shape.activation),
                         pre_[l].data(), params_.data() + offset + w_ * w_, x_[l + 1].data(),
                         mixed_ ? x16_[l + 1].data() : nullptr, micro_, w_);
  }

  // dy (d of the layer's output) back through dense layer l; dx (null for the
  // first layer: nobody needs the data's gradient) the input's gradient.
  void dense_backward(size_t l, float* dy, float* dx) {
    const size_t offset = layers_[l].offset;
    if (!last(l))
      dev::activation_backward(c_, o_.precision, o_.shape.activation, dy, pre_[l].data(),
                               x_[l + 1].data(), micro_ * w_);
    float* weight_grad = grads_.data() + offset;
    dev::linear_backward(c_, o_.precision, gemm_input(l), dy, dy16_.data(), weights(offset),
                         weight_grad, weight_grad + w_ * w_, dx, micro_, w_, w_);
  }

  // The routing of layer l's input (on the host, moe.cpp), the tokens to
  // their experts and back, the experts' layers, the gated sum plus the
  // residual: the host Expert's experts_forward.
  void mixture_forward(size_t l, StepFigures& f) {
    Mixture& mx = mixtures_[l];
    const size_t E = moe_.experts, K = moe_.top_k, n = micro_ * w_;
    mx.x.resize(n);
    mx.gate_weight.resize(E * w_);
    x_[l].download(mx.x, c_.stream);
    dev::check(cudaMemcpyAsync(mx.gate_weight.data(), params_.data() + layers_[l].offset,
                               E * w_ * sizeof(float), cudaMemcpyDeviceToHost, c_.stream),
               "cudaMemcpyAsync device to host");
    compute_.synchronize();
    mx.gate = gate_forward(mx.x, micro_, moe_, mx.gate_weight.data());
    const DispatchPlan plan = plan_dispatch(mx.gate, moe_);
    for (size_t e = 0; e < E; ++e) wanted_[e] += static_cast<double>(plan.wanted[e]);
    dropped_ += plan.dropped;
    // Send order: by the expert each assignment goes to (the fault: the next one).
    std::vector<uint32_t> routed;
    for (const Assignment& a : plan.kept)
      routed.push_back(o_.faults.wrong_expert && device_ ? static_cast<uint32_t>((a.expert + 1) % E)
                                                         : a.expert);
    std::vector<size_t> index(plan.kept.size());
    std::iota(index.begin(), index.end(), size_t{0});
    std::stable_sort(index.begin(), index.end(),
                     [&](size_t a, size_t b) { return routed[a] < routed[b]; });
    const size_t sent = index.size();
    mx.order.clear();
    mx.token_of_row.clear();
    mx.weight_of_row.clear();
    mx.row_of_slot.assign(micro_ * K, -1);
    mx.weight_of_slot.assign(micro_ * K, 0.0f);
    std::vector<size_t> slots_used(micro_, 0);
    // Rows per (peer, expert of that peer).
    std::vector<std::vector<uint64_t>> per_peer_expert(ranks_);
    for (size_t p = 0; p < ranks_; ++p)
      per_peer_expert[p].assign(experts_of_rank(p, ranks_, E).size(), 0);
    for (size_t i = 0; i < sent; ++i) {
      const Assignment& a = plan.kept[index[i]];
      const uint32_t e = routed[index[i]];
      const size_t p = owner_of_expert(e, ranks_, E);
      ++per_peer_expert[p][e - experts_of_rank(p, ranks_, E).begin];
      const float g = mx.gate.weight(a.token, a.slot, E, K);
      mx.order.push_back(a);
      mx.token_of_row.push_back(a.token);
      mx.weight_of_row.push_back(g);
      const size_t slot = a.token * K + slots_used[a.token]++;
      mx.row_of_slot[slot] = static_cast<int32_t>(i);
      mx.weight_of_slot[slot] = g;
    }
    // The counts: from every peer, its rows for each of this rank's experts
    // (over the host communicator: the split sizes are the host's to know).
    std::vector<std::vector<uint64_t>> incoming(ranks_, std::vector<uint64_t>(mine_.size(), 0));
    if (s_.world != nullptr && ranks_ > 1) {
      std::vector<PeerSend> sends;
      std::vector<PeerRecv> recvs;
      double count_bytes = 0;
      for (size_t p = 0; p < ranks_; ++p) {
        sends.push_back(
            {static_cast<int>(p), per_peer_expert[p].data(), per_peer_expert[p].size()});
        recvs.push_back({static_cast<int>(p), incoming[p].data(), incoming[p].size()});
        if (p != rank_) count_bytes += 8.0 * static_cast<double>(per_peer_expert[p].size());
      }
      s_.comm.run(s_.world, count_bytes, &f.ep_bytes,
                  [&](Communicator& c) { c.batch_send_recv(sends, recvs, DataType::kUInt64); });
    } else {
      incoming[0] = per_peer_expert[0];
    }
    mx.send_counts.assign(ranks_, 0);
    mx.recv_counts.assign(ranks_, 0);
    mx.expert_rows.assign(mine_.size(), 0);
    for (size_t p = 0; p < ranks_; ++p)
      for (uint64_t k : per_peer_expert[p]) mx.send_counts[p] += k;
    for (size_t q = 0; q < ranks_; ++q)
      for (size_t j = 0; j < mine_.size(); ++j) {
        mx.recv_counts[q] += incoming[q][j];
        mx.expert_rows[j] += incoming[q][j];
      }
    // Received rows come per peer, each peer's by expert: each local expert's
    // rows gathered into one block (expert-block order).
    const size_t received =
        std::accumulate(mx.recv_counts.begin(), mx.recv_counts.end(), size_t{0});
    mx.received_of_block.assign(received, 0);
    {
      std::vector<size_t> block_at(mine_.size(), 0);
      for (size_t j = 1; j < mine_.size(); ++j)
        block_at[j] = block_at[j - 1] + mx.expert_rows[j - 1];
      size_t at = 0;
      for (size_t q = 0; q < ranks_; ++q)
        for (size_t j = 0; j < mine_.size(); ++j)
          for (size_t r = 0; r < incoming[q][j]; ++r)
            mx.received_of_block[block_at[j]++] = static_cast<uint32_t>(at++);
    }
    // The tables on the device.
    upload(mx.token_of_row_d, mx.token_of_row);
    upload(mx.weight_of_row_d, mx.weight_of_row);
    upload(mx.row_of_slot_d, mx.row_of_slot);
    upload(mx.weight_of_slot_d, mx.weight_of_slot);
    upload(mx.received_of_block_d, mx.received_of_block);
    // Dispatch: the tokens' rows in send order, to their experts.
    float* rows = at_least(send_rows_, sent * w_);
    dev::gather_rows(c_, x_[l].data(), mx.token_of_row_d.data(), rows, sent, w_);
    float* arrived = at_least(recv_rows_, received * w_);
    all_to_all(rows, mx.send_counts, arrived, mx.recv_counts, f);
    // Each local expert's layer over its block.
    float* in = at_least(mx.in, received * w_);
    float* pre = at_least(mx.pre, received * w_);
    float* out = at_least(mx.out, received * w_);
    uint16_t* in16 = mixed_ ? at_least(mx.in16, received * w_) : nullptr;
    dev::gather_rows(c_, arrived, mx.received_of_block_d.data(), in, received, w_);
    if (mixed_) dev::to_16(c_, o_.precision, in, in16, received * w_);
    for_each_expert_block(l, [&](size_t rows_j, size_t at, size_t offset) {
      const void* input = mixed_ ? static_cast<const void*>(in16 + at) : in + at;
      dev::linear_forward(c_, o_.precision, input, weights(offset), pre + at, rows_j, w_, w_);
      dev::bias_activation(c_, o_.precision, o_.shape.activation, pre + at,
                           params_.data() + offset + w_ * w_, out + at, nullptr, rows_j, w_);
    });
    // Combine: the outputs back in received order, to the tokens' ranks.
    dev::scatter_rows(c_, out, mx.received_of_block_d.data(), arrived, received, w_);
    float* returned = at_least(mx.returned, sent * w_);
    all_to_all(arrived, mx.recv_counts, returned, mx.send_counts, f);
    float* y = x_[l + 1].data();
    copy_on_device(c_, y, x_[l].data(), n);  // the residual
    dev::combine_rows(c_, y, returned, mx.row_of_slot_d.data(), mx.weight_of_slot_d.data(), micro_,
                      K, w_);
    dev::round_to(c_, o_.precision, y, n);
    if (mixed_) dev::to_16(c_, o_.precision, y, x16_[l + 1].data(), n);
  }

  // Mixture layer l's local experts in order, each with rows: fn(rows, the
  // block's first element in the received rows, the expert's parameter offset).
  template <class Fn>
  void for_each_expert_block(size_t l, Fn fn) const {
    const Mixture& mx = mixtures_[l];
    size_t block = 0;
    for (size_t j = 0; j < mine_.size(); ++j) {
      const size_t rows = mx.expert_rows[j], at = block * w_;
      block += rows;
      if (rows > 0) fn(rows, at, layers_[l].expert_offsets[j]);
    }
  }

  // The host Expert's experts_backward: dy (d of the layer's output) into dx.
  void mixture_backward(size_t l, const float* dy, float* dx, StepFigures& f) {
    Mixture& mx = mixtures_[l];
    const size_t E = moe_.experts, K = moe_.top_k, n = micro_ * w_;
    const size_t sent = mx.order.size(), received = mx.received_of_block.size();
    copy_on_device(c_, dx, dy, n);  // the residual
    // d of each routed row (its gate weight times the token's dy) and of its
    // gate weight.
    float* d_rows = at_least(send_rows_, sent * w_);
    float* d_weight = at_least(d_weight_rows_, sent);
    dev::combine_backward(c_, dy, mx.returned.data(), mx.token_of_row_d.data(),
                          mx.weight_of_row_d.data(), d_rows, d_weight, sent, w_);
    dev::round_to(c_, o_.precision, d_rows, sent * w_);
    float* arrived = at_least(recv_rows_, received * w_);
    all_to_all(d_rows, mx.send_counts, arrived, mx.recv_counts, f);
    float* d_block = at_least(block_grad_, received * w_);
    float* d_in = at_least(block_input_grad_, received * w_);
    uint16_t* d16 = mixed_ ? at_least(block_words_, received * w_) : nullptr;
    dev::gather_rows(c_, arrived, mx.received_of_block_d.data(), d_block, received, w_);
    for_each_expert_block(l, [&](size_t rows_j, size_t at, size_t offset) {
      dev::activation_backward(c_, o_.precision, o_.shape.activation, d_block + at,
                               mx.pre.data() + at, mx.out.data() + at, rows_j * w_);
      const void* input =
          mixed_ ? static_cast<const void*>(mx.in16.data() + at) : mx.in.data() + at;
      float* weight_grad = grads_.data() + offset;
      dev::linear_backward(c_, o_.precision, input, d_block + at, mixed_ ? d16 + at : nullptr,
                           weights(offset), weight_grad, weight_grad + w_ * w_, d_in + at, rows_j,
                           w_, w_);
    });
    dev::scatter_rows(c_, d_in, mx.received_of_block_d.data(), arrived, received, w_);
    float* back = at_least(send_rows_, sent * w_);  // d_rows is sent already
    all_to_all(arrived, mx.recv_counts, back, mx.send_counts, f);
    dev::combine_rows(c_, dx, back, mx.row_of_slot_d.data(), nullptr, micro_, K, w_);
    // The gate's backward on the host (moe.cpp) into dx and the gate's gradient.
    std::vector<float> d_weight_rows(sent), d_weight_slots(micro_ * K, 0.0f), dx_host(n),
        gate_grad(E * w_);
    float* gate_grad_d = grads_.data() + layers_[l].offset;
    dev::check(cudaMemcpyAsync(d_weight_rows.data(), d_weight, sent * sizeof(float),
                               cudaMemcpyDeviceToHost, c_.stream),
               "cudaMemcpyAsync device to host");
    dev::check(
        cudaMemcpyAsync(dx_host.data(), dx, n * sizeof(float), cudaMemcpyDeviceToHost, c_.stream),
        "cudaMemcpyAsync device to host");
    dev::check(cudaMemcpyAsync(gate_grad.data(), gate_grad_d, E * w_ * sizeof(float),
                               cudaMemcpyDeviceToHost, c_.stream),
               "cudaMemcpyAsync device to host");
    compute_.synchronize();
    for (size_t i = 0; i < sent; ++i)
      d_weight_slots[mx.order[i].token * K + mx.order[i].slot] = d_weight_rows[i];
    gate_backward(mx.x, mx.gate, moe_, mx.gate_weight.data(), d_weight_slots, gate_grad.data(),
                  dx_host.data());
    round_to(o_.precision, gate_grad);
    round_to(o_.precision, dx_host);
    dev::check(
        cudaMemcpyAsync(dx, dx_host.data(), n * sizeof(float), cudaMemcpyHostToDevice, c_.stream),
        "cudaMemcpyAsync host to device");
    dev::check(cudaMemcpyAsync(gate_grad_d, gate_grad.data(), E * w_ * sizeof(float),
                               cudaMemcpyHostToDevice, c_.stream),
               "cudaMemcpyAsync host to device");
    compute_.synchronize();  // the host vectors go out of scope
  }

  // `buffer` grown to at least `n` elements (the routed rows vary per
  // micro-batch); kept across steps, as a caching allocator keeps its blocks.
  // Both streams are done with the old one before it goes.
  template <class T>
  T* at_least(dev::DeviceBuffer<T>& buffer, size_t n) {
    if (buffer.size() >= n && buffer.data() != nullptr) return buffer.data();
    if (comm_stream_ != nullptr)
      dev::check(cudaStreamSynchronize(comm_stream_), "cudaStreamSynchronize");
    compute_.synchronize();
    buffer = dev::DeviceBuffer<T>(allocator_, std::max<size_t>(n, 1));
    return buffer.data();
  }

  template <class T>
  void upload(dev::DeviceBuffer<T>& buffer, const std::vector<T>& host) {
    if (host.empty()) return;
    at_least(buffer, host.size());
    buffer.upload(host, c_.stream);
  }

  // Rows of `send` (send_counts[p] rows to peer p, consecutive in peer order)
  // exchanged with every rank into `recv` (recv_counts[q] from q), in the
  // compute format, on the communicator's stream behind the compute stream's
  // work, which waits for it in turn. One rank: a copy.
  void all_to_all(const float* send, const std::vector<size_t>& send_counts, float* recv,
                  const std::vector<size_t>& recv_counts, StepFigures& f) {
    const size_t sent = std::accumulate(send_counts.begin(), send_counts.end(), size_t{0});
    const size_t received = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0});
    if (device_ == nullptr) {
      copy_on_device(c_, recv, send, sent * w_);
      return;
    }
    std::vector<size_t> send_elements, send_at, recv_elements, recv_at;
    size_t at = 0;
    for (size_t p = 0; p < ranks_; ++p) {
      send_elements.push_back(send_counts[p] * w_);
      send_at.push_back(at);
      at += send_elements.back();
      if (p != rank_) f.ep_bytes += static_cast<double>(send_elements.back() * s_.element);
    }
    at = 0;
    for (size_t q = 0; q < ranks_; ++q) {
      recv_elements.push_back(recv_counts[q] * w_);
      recv_at.push_back(at);
      at += recv_elements.back();
    }
    ready_.record(c_.stream);
    ready_.wait_on(comm_stream_);
    TimedSpan& timed = next_timed();
    ++all_to_alls_;
    timed.start.record(comm_stream_);
    if (mixed_) {
      uint16_t* out = at_least(words_send_, sent * w_);
      uint16_t* in = at_least(words_recv_, received * w_);
      dev::to_16(cc_, o_.precision, send, out, sent * w_);
      device_->all_to_all_v(out, send_elements, send_at, in, recv_elements, recv_at,
                            wire_type(o_.precision));
      dev::from_16(cc_, o_.precision, in, recv, received * w_);
    } else {
      device_->all_to_all_v(send, send_elements, send_at, recv, recv_elements, recv_at,
                            DataType::kFloat32);
    }
    timed.end.record(comm_stream_);
    timed.end.wait_on(c_.stream);
  }

  TimedSpan& next_timed() {
    if (timed_used_ == timed_.size()) timed_.push_back(std::make_unique<TimedSpan>());
    return *timed_[timed_used_++];
  }

  EngineState& s_;
  const TrainOptions& o_;
  int ordinal_;  // selected before the streams and memory below are made on it
  Communicator* device_;
  size_t ranks_, rank_, w_;
  bool mixed_;
  MoeShape moe_;
  Range mine_;
  dev::DeviceAllocator allocator_;
  dev::Stream compute_;
  dev::BlasHandle blas_;
  dev::Context c_;
  cudaStream_t comm_stream_ = nullptr;
  std::unique_ptr<dev::BlasHandle> comm_blas_;
  dev::Context cc_;  // on the communicator's stream
  size_t parameters_ = 0, local_ = 0, replicated_ = 0;
  std::vector<Layer> layers_;
  dev::DeviceBuffer<float> params_, master_, grads_;
  dev::DeviceBuffer<uint16_t> params16_;
  dev::DeviceBuffer<int> flag_;
  std::unique_ptr<dev::DeviceOptimizer> optimizer_;  // null when offloaded
  std::unique_ptr<HostOffload> offload_;             // --offload optimizer
  std::unique_ptr<DeviceGradients> gradients_;
  size_t per_replica_ = 0, micro_ = 0;
  dev::DeviceBuffer<float> batch_inputs_, batch_targets_, diff_;
  std::vector<dev::DeviceBuffer<float>> x_, pre_;  // x_[l]: layer l's input; x_.back() the output
  std::vector<dev::DeviceBuffer<uint16_t>> x16_;
  dev::DeviceBuffer<float> grad_[2];  // an output's gradient and its layer's input's, alternating
  dev::DeviceBuffer<uint16_t> dy16_;
  std::vector<Mixture> mixtures_;  // by layer (this micro-batch's)
  dev::DeviceBuffer<float> send_rows_, recv_rows_, d_weight_rows_, block_grad_, block_input_grad_;
  dev::DeviceBuffer<uint16_t> words_send_, words_recv_, block_words_;
  dev::Event ready_;
  std::vector<std::unique_ptr<TimedSpan>> timed_;
  size_t timed_used_ = 0, all_to_alls_ = 0;
  double step_all_to_all_s_ = 0;
  std::vector<double> wanted_;
  size_t dropped_ = 0;
  double used_peak_ = 0;
};

}  // namespace

TrainResult train_expert_on_device(Communicator* control, Communicator* device,
                                   const TrainOptions& options,
                                   const std::function<void(const StepFigures&)>& on_step) {
  if (options.strategy != Strategy::kExpert)
    throw UsageError("train_expert_on_device runs --strategy ep");
  const size_t ranks = device ? static_cast<size_t>(device->size()) : 1;
  if (device != nullptr) {
    if (device->memory_kind() != MemoryKind::kDevice)
      throw UsageError("train_expert_on_device needs a device communicator, not " +
                       device->backend_name());
    if (control == nullptr || control->size() != device->size() ||
        control->rank() != device->rank())
      throw UsageError(
          "train_expert_on_device: the control and device communicators span other ranks");
  }
  std::string problem = validate_parallel(options, ranks);
  if (problem.empty()) problem = validate(options, ranks);
  if (!problem.empty()) throw UsageError(problem);
  return run_engine(
      options, device ? control : nullptr, false,
      [&](EngineState& state) { return std::make_unique<DeviceExpert>(state, device); }, on_step);
}

}  // namespace ccscope::training_probe

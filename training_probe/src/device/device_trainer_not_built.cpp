// The GPU path where this ccscope was built without CUDA and cuBLAS
// (training_probe/CMakeLists.txt): train_on_device refuses, in one line.
#include "ccscope/collectives/error.h"
#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {

bool device_training_built() { return false; }

std::string device_training_unsupported(const TrainOptions&) {
  return "this ccscope was built without the training probe's GPU path (no nvcc or cuBLAS "
         "found, or -DCCSCOPE_DEVICE_OPS=OFF); use --backend mpi";
}

TrainResult train_on_device(Communicator&, Communicator&, const TrainOptions& options,
                            const std::function<void(const StepFigures&)>&) {
  throw UsageError(device_training_unsupported(options));
}

TrainResult train_grid_on_device(const ParallelGroups&, const ParallelGroups&,
                                 const TrainOptions& options,
                                 const std::function<void(const StepFigures&)>&) {
  throw UsageError(device_training_unsupported(options));
}

TrainResult train_single_on_device(const TrainOptions& options,
                                   const std::function<void(const StepFigures&)>&) {
  throw UsageError(device_training_unsupported(options));
}

TrainResult train_expert_on_device(Communicator*, Communicator*, const TrainOptions& options,
                                   const std::function<void(const StepFigures&)>&) {
  throw UsageError(device_training_unsupported(options));
}

}  // namespace ccscope::training_probe

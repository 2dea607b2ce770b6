// Tests only: the training probe's kernels (src/device/kernels.cuh, the file
// nvcc compiles into device_ops.cu) compiled by the host compiler for the CUDA
// stand-in, which loads this library (libtraining_probe_kernels_emulation.so
// in its lib directory) and runs a launched kernel here, on the stream's
// worker (docs/standin.md, "Kernels"). A kernel added to kernels.cuh and not
// named below fails its launch under the stand-in (cudaErrorInvalidDeviceFunction).
#include "ccscope_kernel_emulation.h"
#include "kernels.cuh"

CCSCOPE_EMULATE_KERNEL(ccscope_round_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_to_16_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_from_16_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_bias_activation_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_activation_backward_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_bias_grad_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_mse_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_nonfinite_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_sgd_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_adam_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_round_copy_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_gather_rows_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_scatter_rows_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_combine_rows_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_combine_backward_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_embed_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_embed_backward_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_layer_norm_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_layer_norm_backward_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_layer_norm_params_backward_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_bias_residual_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_gelu_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_gelu_backward_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_causal_softmax_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_causal_softmax_backward_kernel);
CCSCOPE_EMULATE_KERNEL(ccscope_cross_entropy_kernel);

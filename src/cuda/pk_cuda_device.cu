/**
 * @file pk_cuda_device.cu
 * @brief CUDA device discovery for the backend selection (the CUDA solvers arrive with the CUDA issue).
 */
#include <cuda_runtime.h>

extern "C" int pk_cuda_device_count(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky "no device" error */
    return 0;
  }
  return count;
}

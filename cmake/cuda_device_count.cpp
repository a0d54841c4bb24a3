// Run once at configure time (cmake/ppstage_cuda.cmake): prints how many CUDA devices this
// machine shows, or 0 and the CUDA runtime's reason.
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    std::printf("0 (%s)", cudaGetErrorString(error));
    return 0;
  }
  std::printf("%d", count);
  return 0;
}

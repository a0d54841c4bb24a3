# A stand-in for a CUDA LibTorch folder (lib/libtorch_cuda.so), for
# tests/integration/bad_setup.sh: ppstage's configure stops before reading this file when
# no nvcc is found.
message(FATAL_ERROR "not reached: ppstage checks for nvcc first")

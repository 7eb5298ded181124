// The emulated device (src/cuda/emulator): the element types cuBLAS and cuBLASLt take, with the
// toolkit's names and values (the ones the backend uses, and fp16).
#pragma once

typedef enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_16F = 2,
  CUDA_R_8I = 3,
  CUDA_R_32I = 10,
  CUDA_R_16BF = 14,
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

# The emulated device (-DTARNN_CUDA_EMULATOR=ON; src/cuda/emulator, docs/CUDA.md): the CUDA
# backend's .cu files compiled by the host compiler as C++, with the emulator's CUDA headers first
# (as nvcc puts the toolkit's) and the device branches on (__CUDA_ARCH__ 900, an H100's).
#   tarnn_emulated_cu(FILES f.cu ... [KERNELS])   in the calling directory's scope
# KERNELS: files with kernels, whose every load and store goes through the emulator's checks and
# counts (src/cuda/emulator/memory.cpp): the compiler's AddressSanitizer instrumentation in its
# outlined form, every access a call. Under ASan (clang) the calls are renamed to the emulator's,
# which then call ASan's; without it, the "kernel" form's callbacks are the emulator's alone.
set(TARNN_EMULATOR_DIR ${PROJECT_SOURCE_DIR}/src/cuda/emulator)
set(TARNN_EMULATOR_SOURCES ${TARNN_EMULATOR_DIR}/blas.cpp ${TARNN_EMULATOR_DIR}/fiber.cpp
                           ${TARNN_EMULATOR_DIR}/launch.cpp ${TARNN_EMULATOR_DIR}/memory.cpp
                           ${TARNN_EMULATOR_DIR}/runtime.cpp ${TARNN_EMULATOR_DIR}/wmma.cpp)
set(TARNN_EMULATOR_INCLUDE ${TARNN_EMULATOR_DIR}/include)

if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  set(_llvm -mllvm -asan-instrumentation-with-call-threshold=0)
  if(TARNN_SANITIZE)
    set(TARNN_EMULATOR_KERNEL_FLAGS ${_llvm} -mllvm -asan-memory-access-callback-prefix=__tarnn_emu_)
  else()
    set(TARNN_EMULATOR_KERNEL_FLAGS -fsanitize=kernel-address ${_llvm} -mllvm -asan-stack=0
                                    -mllvm -asan-globals=0)
  endif()
elseif(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT TARNN_SANITIZE)
  set(TARNN_EMULATOR_KERNEL_FLAGS -fsanitize=kernel-address
      --param=asan-instrumentation-with-call-threshold=0 --param=asan-stack=0
      --param=asan-globals=0)
else()
  message(FATAL_ERROR "TARNN_CUDA_EMULATOR needs GCC or clang, and clang under TARNN_SANITIZE "
                      "(its instrumentation's callbacks can be renamed; GCC's cannot)")
endif()

function(tarnn_emulated_cu)
  cmake_parse_arguments(E "KERNELS" "" "FILES" ${ARGN})
  set(options -x c++ -include cuda_runtime.h) # -x: CMake 3.18's policies do not add it
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND options -Wno-unknown-pragmas) # the kernels' #pragma unroll is nvcc's and clang's
  endif()
  if(E_KERNELS)
    list(APPEND options ${TARNN_EMULATOR_KERNEL_FLAGS})
  endif()
  set_source_files_properties(${E_FILES} PROPERTIES LANGUAGE CXX
    COMPILE_DEFINITIONS "__CUDACC__;__CUDA_ARCH__=900" COMPILE_OPTIONS "${options}")
endfunction()

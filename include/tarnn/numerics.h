// The numerics of a run as types: the device it runs on, the precision of its GEMMs and the format
// its state S and z is stored in. Strings ("cuda", "bf16") are parsed into these at the edges only
// (the command's flags, Python's arguments, the server's options, JSON) and named back from them;
// below the Engine every choice is one of these enums. A new precision or state format is a new
// enumerator and its row in src/model/numerics.cpp, then the kernels and the list of each backend
// that runs it (docs/ARCHITECTURE.md, "Where a change goes").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.h"

namespace tarnn {

// A device is its backend's place in the registry (src/engine/registry.cpp, one line a backend):
// Cpu and Cuda are named for the code that asks for them; a backend added after them is
// Device(its place), named by its row, and needs no enumerator here.
enum class Device : int { Cpu, Cuda };

// The GEMMs' arithmetic. Fp32: the exact reference. Tf32: TF32 tensor cores (cuda). Bf16: weights
// and GEMM inputs rounded to bfloat16, products summed in fp32 (AVX512_BF16 on the CPU, tensor
// cores on CUDA). Int8: weights with a scale per output and each GEMM input row with its own
// scale quantized to int8, products summed in int32 (kernels/gemm_int8_ref.h; the CPU). phi, the
// state, LayerNorm, the mixture and the sampler are fp32 in every one.
enum class Precision { Fp32, Bf16, Int8, Tf32 };

// How S is stored between positions (z stays fp32): fp32, the exact reference; fp16, half the
// bytes; bf16, measured and refused (refusal()). The arithmetic is fp32 whatever the storage
// (docs/STATE.md).
enum class StateFormat { Fp32, Fp16, Bf16 };

// The precision of the head (the predictor Wout, 256 -> 3K) when the layers' GEMMs run in p: int8
// leaves it in fp32 (in int8 it alone moved the shipped model by +0.165 bits/dim, and it is 0.1%
// of the products: docs/PRECISION.md); the others are p.
Precision head_precision(Precision p);

// A device's name is its backend's row's (src/engine/registry.cpp), the one description of it.
const char *name(Device d);      // "cpu", "cuda"
const char *name(Precision p);   // "fp32", "tf32", "bf16"
const char *name(StateFormat s); // "fp32"

// What each is, in a few words, and every value so described: "fp32 (exact reference), bf16 (...)
// or tf32 (cuda)", for the help of the command and the bindings.
const char *describe(Precision p);
const char *describe(StateFormat s);
std::string device_help(); // "cpu (...) or cuda (...)", each device's row's words
std::string precision_help();
std::string state_format_help();

// Why the engine does not offer a state format whose kernels exist (measured and refused:
// docs/STATE.md), or null. parse_state_format and resolve_run_options refuse it with this reason.
const char *refusal(StateFormat s);

// The longest image (in positions) a state format is accepted for, 0 for any: fp16's error grows
// with the position (a running sum loses the low bits of later increments), measured to be
// harmless up to the CIFAR-10 shape's 3,071 positions (docs/STATE.md). resolve_run_options
// refuses a longer model.
int state_max_positions(StateFormat s);

// Every value of each enum, in the order of the help texts (refused state formats included: the
// study and the kernels' tests run them).
std::vector<Device> all_devices();
std::vector<Precision> all_precisions();
std::vector<StateFormat> all_state_formats();

// The value a string names, or Error naming the field and the values there are ("precision fp16:
// not a precision (fp32, bf16, or tf32 on cuda)"; the command says "--precision fp16").
Device parse_device(const std::string &s);
Precision parse_precision(const std::string &s);
StateFormat parse_state_format(const std::string &s);

// The chunk of positions over which linear attention defers the state's write (docs/SPEC.md, "The
// state in chunks"): TARNN_STATE_CHUNK, 1 to kMaxStateChunk (unset: 1, S and z written at every
// position, the engine's path); anything else is an Error naming the variable. A switch for
// comparisons, read wherever a state is laid out (docs/ENVIRONMENT.md).
constexpr int kMaxStateChunk = 16;
int state_chunk();

// The bytes of the state of one image: S (d_head^2, in the format) and z (d_head, fp32) of every
// layer and head, and the chunk's buffer (state_chunk), constant in the position. The one place a
// state's size is computed (kernels/state_format.h lays it out).
int64_t state_bytes_per_image(const Config &c, StateFormat s);

// Whether the model attends by softmax (config.json "attention": "softmax"): it keeps the keys and
// values of every earlier position (a KV cache) where linear attention keeps S and z.
bool keeps_kv_cache(const Config &c);

// The KV cache of one image at the last position: K and V of every layer and head for all L
// positions, fp32 (what a softmax model holds per image; it grows with the position, and this is
// its size at the end).
int64_t kv_cache_bytes_per_image(const Config &c);

// What one image keeps of its past, the most it holds at any position: the state S and z in
// format s (linear attention), or the full-length KV cache (softmax, fp32 whatever s). Every
// memory check and batch layout counts this.
int64_t memory_bytes_per_image(const Config &c, StateFormat s);

} // namespace tarnn

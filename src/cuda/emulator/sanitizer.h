// Whether this file is built with AddressSanitizer (GCC says so by a macro, clang by a feature),
// and its interface where it is: the emulated device tells it of its fibers and keeps a block's
// shared memory where it reports an overrun.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define TARNN_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TARNN_EMU_ASAN 1
#endif
#endif
#ifdef TARNN_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* ThreadSanitizer builds only (AMDGPU_DROPIN_TSAN). The library's Rust code
 * is instrumented by rustc's LLVM, which calls __tsan_memcpy/memmove/memset;
 * GCC's older libtsan has no such entry points. These forward to the C
 * functions, which libtsan intercepts (and checks) as usual. */
#include <string.h>

void* __tsan_memcpy(void* dst, const void* src, size_t n);
void* __tsan_memmove(void* dst, const void* src, size_t n);
void* __tsan_memset(void* dst, int value, size_t n);

void* __tsan_memcpy(void* dst, const void* src, size_t n) { return memcpy(dst, src, n); }
void* __tsan_memmove(void* dst, const void* src, size_t n) { return memmove(dst, src, n); }
void* __tsan_memset(void* dst, int value, size_t n) { return memset(dst, value, n); }

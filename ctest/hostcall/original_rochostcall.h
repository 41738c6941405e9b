/* The four declarations exactly as ROCclr's original rochostcall.hpp has
 * them: plain C++ functions (no extern "C"), so a C++ caller compiled against
 * it references the Itanium-mangled names. Written here for the test; not a
 * copy of the original file. */
#ifndef AMDGPU_DROPIN_TEST_ORIGINAL_ROCHOSTCALL_H
#define AMDGPU_DROPIN_TEST_ORIGINAL_ROCHOSTCALL_H

#include <cstddef>
#include <cstdint>

size_t getHostcallBufferSize(uint32_t num_packets);
uint32_t getHostcallBufferAlignment(void);
bool enableHostcalls(void* buffer, uint32_t numPackets, const void* queue);
void disableHostcalls(void* buffer, const void* queue);

#endif

/*
 * A shared object with the static library linked in, as ROCclr links into
 * libamdhip64.so: its dynamic symbol table must hold the library's API and
 * this file's own function, nothing of Rust's std or of our internals.
 */
#include <stddef.h>

#include "rochostcall.hpp"

__attribute__((visibility("default"))) size_t consumer_plugin_buffer_size(void) {
  return getHostcallBufferSize(4);
}

#define _GNU_SOURCE
#include "pf_device.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amdgpu_dropin_hostcall.h"
#include "device_sim.h"
#include "device_sim_phase.h"
#include "hsa/hsa.h"
#include "rochostcall.hpp"


/* ---- Arguments ----------------------------------------------------------- */

pf_arg_t pf_i32(int v) {
  pf_arg_t a = {PF_I32, (uint64_t)(uint32_t)v, NULL};
  return a;
}
pf_arg_t pf_u32(unsigned v) {
  pf_arg_t a = {PF_I32, (uint64_t)v, NULL};
  return a;
}
pf_arg_t pf_i64(long long v) {
  pf_arg_t a = {PF_I64, (uint64_t)v, NULL};
  return a;
}
pf_arg_t pf_u64(unsigned long long v) {
  pf_arg_t a = {PF_I64, (uint64_t)v, NULL};
  return a;
}
pf_arg_t pf_f64(double v) {
  pf_arg_t a = {PF_F64, 0, NULL};
  memcpy(&a.bits, &v, sizeof(v));
  return a;
}
pf_arg_t pf_str(const char* s) {
  pf_arg_t a = {PF_STR, 0, s};
  return a;
}
pf_arg_t pf_ptr(const void* p) {
  pf_arg_t a = {PF_PTR, (uint64_t)(uintptr_t)p, NULL};
  return a;
}

pf_arg_t pf_ld(long double v) { return pf_f64((double)v); }
pf_arg_t pf_int_ptr(int* p) { return pf_ptr(p); }

/* ---- Encoding ------------------------------------------------------------ */

size_t pf_pack_string(const char* s, uint64_t* words, size_t capacity) {
  size_t n = strlen(s) + 1; /* with the NUL */
  size_t count = (n + 7) / 8;
  if (count > capacity) return 0;
  memset(words, 0, count * sizeof(uint64_t));
  /* Little-endian byte order within each word, as the device stores it. */
  for (size_t i = 0; i < n; ++i) {
    words[i / 8] |= (uint64_t)(unsigned char)s[i] << (8 * (i % 8));
  }
  return count;
}

static bool add_packet(pf_message_t* m, const uint64_t* words, size_t count) {
  if (m->packet_count >= PF_MAX_PACKETS || count > 7) return false;
  m->len[m->packet_count] = (uint8_t)count;
  memset(m->words[m->packet_count], 0, sizeof(m->words[0]));
  memcpy(m->words[m->packet_count], words, count * sizeof(uint64_t));
  m->packet_count++;
  return true;
}

/* Chunks `count` words into packets of up to 7. */
static bool add_chunked(pf_message_t* m, const uint64_t* words, size_t count) {
  for (size_t at = 0; at < count; at += 7) {
    size_t n = count - at < 7 ? count - at : 7;
    if (!add_packet(m, words + at, n)) return false;
  }
  return true;
}

#define PF_SCRATCH_WORDS (PF_MAX_PACKETS * 7)

bool pf_encode(pf_message_t* out, pf_packing_t packing, uint64_t control, const char* format,
               const pf_arg_t* args, size_t arg_count) {
  static _Thread_local uint64_t words[PF_SCRATCH_WORDS];
  out->packet_count = 0;
  out->begin_override = 0;
  size_t count = 0;
  words[count++] = control;
  size_t n = pf_pack_string(format, words + count, PF_SCRATCH_WORDS - count);
  if (n == 0) return false;
  if (packing == PF_PER_ARGUMENT) {
    /* BEGIN carries the control word alone, then the format in chunks. */
    if (!add_packet(out, words, 1) || !add_chunked(out, words + 1, n)) return false;
    count = 0;
  } else {
    count += n;
  }
  for (size_t a = 0; a < arg_count; ++a) {
    size_t start = count;
    if (args[a].kind == PF_STR && args[a].str != NULL) {
      n = pf_pack_string(args[a].str, words + count, PF_SCRATCH_WORDS - count);
      if (n == 0) return false;
      count += n;
    } else {
      if (count >= PF_SCRATCH_WORDS) return false;
      words[count++] = args[a].kind == PF_STR ? 0 : args[a].bits; /* NULL %s: one zero word */
    }
    if (packing == PF_PER_ARGUMENT) {
      if (!add_chunked(out, words + start, count - start)) return false;
      count = 0;
    }
  }
  if (packing == PF_PACKED) return add_chunked(out, words, count);
  return true;
}

bool pf_encode_words(pf_message_t* out, const uint64_t* words, size_t count) {
  out->packet_count = 0;
  out->begin_override = 0;
  if (count == 0) return add_packet(out, words, 0);
  return add_chunked(out, words, count);
}

/* ---- Sending --------------------------------------------------------------- */

int pf_send_wave(void* buffer, uint64_t lanes_mask, pf_message_t* const messages[64],
                 uint64_t results[64]) {
  static _Thread_local uint64_t lanes[64][8];
  uint64_t desc[64];
  uint32_t next[64];
  for (int i = 0; i < 64; ++i) {
    desc[i] = PF_DESC_BEGIN;
    next[i] = 0;
    if ((lanes_mask >> i) & 1) {
      results[i] = 0;
      if (messages[i]->begin_override != 0) desc[i] = messages[i]->begin_override;
    }
  }
  for (;;) {
    uint64_t active = 0;
    memset(lanes, 0, sizeof(lanes));
    for (int i = 0; i < 64; ++i) {
      if (!((lanes_mask >> i) & 1) || next[i] >= messages[i]->packet_count) continue;
      const pf_message_t* m = messages[i];
      uint32_t p = next[i];
      bool last = p + 1 == m->packet_count;
      /* The device rewrites LEN and sets END on the descriptor it holds. */
      uint64_t d = desc[i] & ~(7ull << PF_DESC_LEN_SHIFT);
      d |= (uint64_t)m->len[p] << PF_DESC_LEN_SHIFT;
      if (last) d |= PF_DESC_END;
      lanes[i][0] = d;
      memcpy(&lanes[i][1], m->words[p], 7 * sizeof(uint64_t));
      active |= 1ull << i;
    }
    if (active == 0) return 0;
    int rc = device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_PRINTF, active, lanes, PF_TIMEOUT_NS);
    if (rc != 0) return rc;
    for (int i = 0; i < 64; ++i) {
      if (!((active >> i) & 1)) continue;
      if (++next[i] == messages[i]->packet_count) {
        results[i] = lanes[i][0];
      } else {
        desc[i] = lanes[i][0];
      }
    }
  }
}

int pf_send(void* buffer, pf_message_t* message, uint64_t* result) {
  pf_message_t* messages[64] = {message};
  uint64_t results[64];
  int rc = pf_send_wave(buffer, 1, messages, results);
  *result = results[0];
  return rc;
}

/* ---- Environment ----------------------------------------------------------- */

static const void* const pf_queue = (const void*)0x5150;

/* The occupancy bitmap of the phase-bit buffer (PF_PROTOCOL=phase-bit). */
static uint32_t* pf_bitmap;

static bool pf_phase_bit(void) {
  const char* protocol = getenv("PF_PROTOCOL");
  return protocol != NULL && strcmp(protocol, "phase-bit") == 0;
}

static size_t pf_buffer_size(uint32_t packets) {
  return pf_phase_bit() ? amdgpu_dropin_hostcall_buffer_size(AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT, packets)
                        : getHostcallBufferSize(packets);
}

/* Zeroes and enables `buffer` in the protocol PF_PROTOCOL names. */
static bool pf_enable(void* buffer, uint32_t packets) {
  memset(buffer, 0, pf_buffer_size(packets));
  if (!pf_phase_bit()) return enableHostcalls(buffer, packets, pf_queue);
  memset(pf_bitmap, 0, amdgpu_dropin_hostcall_occupancy_size(packets));
  return amdgpu_dropin_hostcall_enable(buffer, packets, pf_queue, AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT,
                                       pf_bitmap) == AMDGPU_DROPIN_HOSTCALL_OK;
}

void* pf_setup(uint32_t packets) {
  if (hsa_init() != HSA_STATUS_SUCCESS) {
    fprintf(stderr, "hsa_init failed\n");
    exit(1);
  }
  void* buffer = NULL;
  if (posix_memalign(&buffer, 4096, pf_buffer_size(packets)) != 0) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  if (pf_phase_bit()) {
    pf_bitmap = calloc(1, amdgpu_dropin_hostcall_occupancy_size(packets));
    if (pf_bitmap == NULL || !device_sim_phase_attach(buffer)) {
      fprintf(stderr, "phase-bit setup failed\n");
      exit(1);
    }
  }
  if (!pf_enable(buffer, packets)) {
    fprintf(stderr, "enable failed\n");
    exit(1);
  }
  return buffer;
}

bool pf_reenable(void* buffer, uint32_t packets) {
  disableHostcalls(buffer, pf_queue);
  return pf_enable(buffer, packets);
}

void pf_teardown(void* buffer) {
  disableHostcalls(buffer, pf_queue);
  device_sim_phase_detach(buffer);
  free(pf_bitmap);
  pf_bitmap = NULL;
  free(buffer);
  hsa_shut_down();
}

static int saved_fd[2] = {-1, -1};
static FILE* capture_file[2] = {NULL, NULL};

void pf_capture_begin(void) {
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < 2; ++i) {
    capture_file[i] = tmpfile();
    saved_fd[i] = dup(1 + i);
    if (capture_file[i] == NULL || saved_fd[i] < 0 || dup2(fileno(capture_file[i]), 1 + i) < 0) {
      perror("capture");
      exit(1);
    }
  }
}

static char* slurp(FILE* f, size_t* len) {
  if (fseek(f, 0, SEEK_END) != 0) exit(1);
  long size = ftell(f);
  if (size < 0) exit(1);
  rewind(f);
  char* data = malloc((size_t)size + 1);
  if (data == NULL) exit(1);
  size_t got = fread(data, 1, (size_t)size, f);
  data[got] = '\0';
  *len = got;
  return data;
}

void pf_capture_end(char** out, size_t* out_len, char** err, size_t* err_len) {
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < 2; ++i) {
    if (dup2(saved_fd[i], 1 + i) < 0) exit(1);
    close(saved_fd[i]);
  }
  *out = slurp(capture_file[0], out_len);
  *err = slurp(capture_file[1], err_len);
  fclose(capture_file[0]);
  fclose(capture_file[1]);
}

int pf_send_captured(void* buffer, pf_message_t* message, uint64_t* result, pf_output_t* output) {
  pf_capture_begin();
  int rc = pf_send(buffer, message, result);
  pf_capture_end(&output->out, &output->out_len, &output->err, &output->err_len);
  return rc;
}

void pf_output_free(pf_output_t* output) {
  free(output->out);
  free(output->err);
}

void pf_print_escaped(FILE* f, const char* s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\\' || c == '"') {
      fprintf(f, "\\%c", c);
    } else if (c >= 32 && c < 127) {
      fputc(c, f);
    } else {
      fprintf(f, "\\x%02x", c);
    }
  }
  fputc('"', f);
}

/* PRINTF test harness: a device-side encoder that packs printf messages the
 * way ROCm's device libraries do, a wave driver that sends them through the
 * device simulator (hostcall service 2), and capture of fds 1/2.
 *
 * Encoding (one lane's printf call):
 *   packet 1: BEGIN, LEN 1, the control word (bit 0 = stderr);
 *   the format string, NUL-terminated, zero-padded to 8 bytes, in packets of
 *   up to 7 words;
 *   each argument in its own packet(s): ints zero-extended to 64 bits, longs
 *   and pointers as is, doubles as their bits; a %s string like the format
 *   (a NULL string as one zero word); the last packet carries END.
 * PF_PACKED instead packs the whole message, up to 7 words per packet (the
 * device library accepts both). After every non-END packet the lane reuses
 * the descriptor the host returned (id filled in, BEGIN cleared); the reply
 * to the END packet is printf's return value. */
#ifndef AMDGPU_DROPIN_PF_DEVICE_H
#define AMDGPU_DROPIN_PF_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PF_DESC_BEGIN 1ull
#define PF_DESC_END 2ull
#define PF_DESC_LEN_SHIFT 5
#define PF_DESC_ID_SHIFT 8
#define PF_ERROR UINT64_MAX
#define PF_POISON_DESCRIPTOR (((1ull << 56) - 1) << PF_DESC_ID_SHIFT)
#define PF_TIMEOUT_NS (10ull * 1000 * 1000 * 1000)

/* Checks and test runner: the hostcall suite's (dropin_check.h, HC_RUN). */
#include "hc_test.h"

/* ---- Arguments ----------------------------------------------------------- */

typedef enum pf_kind { PF_I32, PF_I64, PF_F64, PF_STR, PF_PTR } pf_kind_t;

typedef struct pf_arg {
  pf_kind_t kind;
  uint64_t bits;    /* I32: zero-extended; I64/PTR: value; F64: IEEE bits */
  const char* str;  /* PF_STR (NULL allowed: sent as one zero word) */
} pf_arg_t;

pf_arg_t pf_i32(int v);
pf_arg_t pf_u32(unsigned v);
pf_arg_t pf_i64(long long v);
pf_arg_t pf_u64(unsigned long long v);
pf_arg_t pf_f64(double v);
pf_arg_t pf_str(const char* s);
pf_arg_t pf_ptr(const void* p);
/* long double: a 64-bit double on the GPU. */
pf_arg_t pf_ld(long double v);
pf_arg_t pf_int_ptr(int* p);

/* The pf_arg_t of a C value, by its type (as the compiler lowers a vararg). */
#define PF_ARG(x)                                                               \
  _Generic((x), signed char: pf_i32, unsigned char: pf_i32, short: pf_i32,      \
           unsigned short: pf_i32, int: pf_i32, unsigned int: pf_u32,           \
           long: pf_i64, long long: pf_i64, unsigned long: pf_u64,              \
           unsigned long long: pf_u64, float: pf_f64, double: pf_f64,           \
           long double: pf_ld, char*: pf_str, const char*: pf_str,              \
           void*: pf_ptr, const void*: pf_ptr, int*: pf_int_ptr)(x)

/* ---- Messages ------------------------------------------------------------ */

/* One lane's message as a list of packets (each up to 7 data words). */
#define PF_MAX_PACKETS 2048
typedef struct pf_message {
  uint32_t packet_count;
  uint8_t len[PF_MAX_PACKETS];
  uint64_t words[PF_MAX_PACKETS][7];
  uint64_t begin_override; /* if non-zero: descriptor of the first packet */
} pf_message_t;

typedef enum pf_packing { PF_PER_ARGUMENT, PF_PACKED } pf_packing_t;

/* Encodes a printf call. Returns false if it does not fit. */
bool pf_encode(pf_message_t* out, pf_packing_t packing, uint64_t control, const char* format,
               const pf_arg_t* args, size_t arg_count);
/* Encodes raw message words (control, format, ...) up to 7 per packet. */
bool pf_encode_words(pf_message_t* out, const uint64_t* words, size_t count);
/* Packs a string (NUL included, zero-padded) into words; returns the count. */
size_t pf_pack_string(const char* s, uint64_t* words, size_t capacity);

/* Sends messages[i] from lane i of one wave for each set bit of lanes_mask,
 * lanes in lockstep (a lane whose message is done goes inactive). The
 * reply to each lane's last packet goes to results[i]. Returns 0 or a
 * negative device_sim error. */
int pf_send_wave(void* buffer, uint64_t lanes_mask, pf_message_t* const messages[64],
                 uint64_t results[64]);
/* One lane (lane 0). */
int pf_send(void* buffer, pf_message_t* message, uint64_t* result);

/* ---- Environment ----------------------------------------------------------- */

/* hsa_init + an enabled buffer of `packets` packets; exits on failure. */
/* PF_PROTOCOL=phase-bit makes it a phase-bit buffer (else classic). */
void* pf_setup(uint32_t packets);
/* Disables `buffer`, zeroes it and enables it again (same protocol). */
bool pf_reenable(void* buffer, uint32_t packets);
void pf_teardown(void* buffer);

/* Output capture: fds 1 and 2 go to temporary files until pf_capture_end,
 * which returns their contents (malloc'ed, NUL-terminated; sizes in *len). */
void pf_capture_begin(void);
void pf_capture_end(char** out, size_t* out_len, char** err, size_t* err_len);
/* What one captured send printed (malloc'ed, NUL-terminated). */
typedef struct pf_output {
  char* out;
  size_t out_len;
  char* err;
  size_t err_len;
} pf_output_t;
/* pf_send with fds 1 and 2 captured into *output (pf_output_free frees it). */
int pf_send_captured(void* buffer, pf_message_t* message, uint64_t* result, pf_output_t* output);
void pf_output_free(pf_output_t* output);

/* Prints a byte string escaped (for failure messages). */
void pf_print_escaped(FILE* f, const char* s, size_t n);

#endif /* AMDGPU_DROPIN_PF_DEVICE_H */

/* The C test suite's one check helper (C and C++).
 *
 * A failed check prints one line to stderr,
 *     FAIL <file>:<line>: <condition>[: <message>]
 * and counts into `dropin_failures`; the program's main returns non-zero
 * when that is above 0. The _MSG forms add a printf-style message; the
 * REQUIRE forms also leave the current function (which returns void).
 *
 * A program defines the counter once: DROPIN_CHECK_DEFINE_FAILURES; at file
 * scope, and its main returns dropin_check_exit_code(). In a forked child, DROPIN_CHECK_INTO counts into a local instead
 * and marks the line "CHILD FAIL" (the parent captures the child's stderr). */
#ifndef DROPIN_CHECK_H
#define DROPIN_CHECK_H

#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

extern int dropin_failures;

#define DROPIN_CHECK_DEFINE_FAILURES int dropin_failures = 0

/* Prints the failure line; `format` may be "" (no message). */
static inline void dropin_check_report(const char* tag, const char* file, int line, const char* condition,
                                       const char* format, ...) {
  fprintf(stderr, "%s %s:%d: %s", tag, file, line, condition);
  if (format[0] != '\0') {
    va_list args;
    va_start(args, format);
    fputs(": ", stderr);
    vfprintf(stderr, format, args);
    va_end(args);
  }
  fputc('\n', stderr);
  fflush(stderr);
}

#define DROPIN_CHECK(cond) DROPIN_CHECK_MSG(cond, "")

#define DROPIN_CHECK_MSG(cond, ...)                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      dropin_failures++;                                                     \
      dropin_check_report("FAIL", __FILE__, __LINE__, #cond, __VA_ARGS__);   \
    }                                                                        \
  } while (0)

#define DROPIN_REQUIRE(cond) DROPIN_REQUIRE_MSG(cond, "")

#define DROPIN_REQUIRE_MSG(cond, ...) \
  do {                                \
    if (!(cond)) {                    \
      DROPIN_CHECK_MSG(cond, __VA_ARGS__); \
      return;                         \
    }                                 \
  } while (0)

/* In a child process: counts into `counter` (a local int). */
#define DROPIN_CHECK_INTO(counter, cond, ...)                                   \
  do {                                                                          \
    if (!(cond)) {                                                              \
      (counter)++;                                                              \
      dropin_check_report("CHILD FAIL", __FILE__, __LINE__, #cond, __VA_ARGS__); \
    }                                                                           \
  } while (0)

/* main's exit code from the failure count (0 when no check failed, else 1),
 * after one summary line on stdout. */
static inline int dropin_check_exit_code(void) {
  printf("%s: %d failure(s)\n", dropin_failures == 0 ? "passed" : "FAILED", dropin_failures);
  return dropin_failures == 0 ? 0 : 1;
}

#ifdef __cplusplus
}
#endif

#endif /* DROPIN_CHECK_H */

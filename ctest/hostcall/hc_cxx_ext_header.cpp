// A C++ translation unit using the generated amdgpu_dropin_hostcall.h: it must
// compile as C++17 with the suite's warnings, keep the C layout, and a
// captureless lambda must serve as a handler. C++ exceptions (the header's
// "C++ exceptions" paragraph): one leaving a handler wrapped in
// amdgpu_dropin::catching_lane / catching_packet fails the call and the
// process goes on; one leaving an unwrapped handler aborts the process, which
// a forked child shows (SIGABRT, with the runtime's message; argument
// unwrapped_throw, ctest hostcall_cxx_unwrapped_throw).
#include "amdgpu_dropin_hostcall.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sched.h>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "device_sim.h"
#include "hsa_sim.h"
#include "rochostcall.hpp"

static_assert(sizeof(amdgpu_dropin_hostcall_packet_t) == 24 + 4096, "packet size");
static_assert(offsetof(amdgpu_dropin_hostcall_packet_t, slots) == 24, "slots offset");
static_assert(std::is_same<std::underlying_type<amdgpu_dropin_hostcall_status_t>::type, int32_t>::value,
              "status is a 32-bit enum");

static int32_t throwing_lane(void* user, void*, uint32_t, uint32_t, uint64_t* slot) {
  *static_cast<int*>(user) += 1;
  if (slot[0] == 13) throw std::runtime_error("unlucky lane");
  slot[0] += 1;
  return 0;
}

static int32_t throwing_packet(void* user, amdgpu_dropin_hostcall_packet_t*) {
  *static_cast<int*>(user) += 1;
  throw std::runtime_error("no packet today");
}

// Wrapped handlers: the throwing lane fails alone, the packet fails whole.
static int wrapped_handlers_catch(void* buffer) {
  int failures = 0, calls = 0;
  if (amdgpu_dropin_hostcall_register_lane_handler(201, nullptr, amdgpu_dropin::catching_lane<throwing_lane>,
                                                   &calls) != AMDGPU_DROPIN_HOSTCALL_OK ||
      amdgpu_dropin_hostcall_register_packet_handler(202, nullptr, amdgpu_dropin::catching_packet<throwing_packet>,
                                                     &calls) != AMDGPU_DROPIN_HOSTCALL_OK) {
    return 1;
  }
  uint64_t lanes[64][8];
  std::memset(lanes, 0, sizeof(lanes));
  lanes[1][0] = 13;
  lanes[2][0] = 20;
  if (device_sim_hostcall(buffer, 201, 0x6, lanes, 0) != DEVICE_SIM_OK || lanes[1][0] != UINT64_MAX ||
      lanes[2][0] != 21 || calls != 2) {
    std::fprintf(stderr, "catching_lane: lanes %llx %llx, %d calls\n", (unsigned long long)lanes[1][0],
                 (unsigned long long)lanes[2][0], calls);
    failures++;
  }
  std::memset(lanes, 0, sizeof(lanes));
  if (device_sim_hostcall(buffer, 202, 0x5, lanes, 0) != DEVICE_SIM_OK || lanes[0][0] != UINT64_MAX ||
      lanes[2][0] != UINT64_MAX || calls != 3) {
    std::fprintf(stderr, "catching_packet: lanes %llx %llx, %d calls\n", (unsigned long long)lanes[0][0],
                 (unsigned long long)lanes[2][0], calls);
    failures++;
  }
  amdgpu_dropin_hostcall_unregister_handler(201, nullptr);
  amdgpu_dropin_hostcall_unregister_handler(202, nullptr);
  return failures;
}

static size_t throwing_sink(void*, void*, uint32_t, const char*, size_t) { throw std::runtime_error("no output"); }

static std::atomic<int> poll_calls{0};
static int32_t throwing_poll(void*, void*) {
  poll_calls += 1;
  throw std::runtime_error("no poll");
}

// The printf sink and poll wrappers: an exception is a failed call; a
// wrapped poll registered with the listener fails and the listener goes on.
static int wrapped_sink_and_poll_catch(void) {
  int failures = 0;
  if (amdgpu_dropin::catching_printf_sink<throwing_sink>(nullptr, nullptr, AMDGPU_DROPIN_HOSTCALL_PRINTF_STDOUT,
                                                         "x", 1) != 0) {
    std::fprintf(stderr, "catching_printf_sink: a throwing sink did not fail\n");
    failures++;
  }
  static char key[8];
  uint64_t doorbell = 0;
  if (amdgpu_dropin_hostcall_register_poll(key, amdgpu_dropin::catching_poll<throwing_poll>, nullptr, &doorbell) !=
      AMDGPU_DROPIN_HOSTCALL_OK) {
    return failures + 1;
  }
  int before = poll_calls.load();
  for (int ring = 1; ring <= 2; ++ring) {
    hsa_signal_add_screlease(hsa_signal_t{doorbell}, 1);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (poll_calls.load() < before + ring && std::chrono::steady_clock::now() < deadline) sched_yield();
  }
  if (poll_calls.load() < before + 2) {
    std::fprintf(stderr, "catching_poll: the listener stopped polling after a throw (%d calls)\n",
                 poll_calls.load() - before);
    failures++;
  }
  if (amdgpu_dropin_hostcall_unregister_poll(key) != AMDGPU_DROPIN_HOSTCALL_OK) failures++;
  return failures;
}

// In a forked child (its own listener): an unwrapped handler throws.
static int unwrapped_throw_aborts(void) {
  int err[2];
  if (pipe(err) != 0) return 1;
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    dup2(err[1], 2);
    close(err[0]);
    alarm(30);  // a hang ends as SIGALRM, not SIGABRT
    void* buffer = nullptr;
    if (posix_memalign(&buffer, 4096, getHostcallBufferSize(4)) != 0 || !enableHostcalls(buffer, 4, nullptr)) _exit(2);
    int calls = 0;
    if (amdgpu_dropin_hostcall_register_lane_handler(203, nullptr, throwing_lane, &calls) != AMDGPU_DROPIN_HOSTCALL_OK)
      _exit(3);
    uint64_t lanes[64][8];
    std::memset(lanes, 0, sizeof(lanes));
    lanes[0][0] = 13;
    device_sim_hostcall(buffer, 203, 1, lanes, 0);
    _exit(4);  // not reached: the exception aborts the process
  }
  close(err[1]);
  std::string text;
  char chunk[512];
  ssize_t n;
  while ((n = read(err[0], chunk, sizeof(chunk))) > 0) text.append(chunk, static_cast<size_t>(n));
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  bool said = text.find("Rust cannot catch foreign exceptions") != std::string::npos;
  if (!aborted || !said) {
    std::fprintf(stderr, "unwrapped throw: status %#x (want SIGABRT), stderr: %s\n", status, text.c_str());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (hsa_init() != HSA_STATUS_SUCCESS) return 1;
  if (argc > 1 && std::strcmp(argv[1], "unwrapped_throw") == 0) {
#if defined(__SANITIZE_THREAD__)
    std::printf("skipped: ThreadSanitizer cannot follow the threads a forked child starts\n");
    (void)unwrapped_throw_aborts;
    return 77;
#else
    int failed = unwrapped_throw_aborts();
    std::printf("%s\n", failed == 0 ? "ok" : "FAILED");
    return failed == 0 ? 0 : 1;
#endif
  }
  int failures = 0;
  void* buffer = nullptr;
  if (posix_memalign(&buffer, 4096, getHostcallBufferSize(4)) != 0) return 1;
  if (!enableHostcalls(buffer, 4, nullptr)) return 1;
  amdgpu_dropin_hostcall_packet_fn twice = [](void* user, amdgpu_dropin_hostcall_packet_t* packet) {
    *static_cast<int*>(user) += 1;
    for (int lane = 0; lane < 64; ++lane) packet->slots[lane][0] *= 2;
    return int32_t{0};
  };
  int calls = 0;
  if (amdgpu_dropin_hostcall_register_packet_handler(200, nullptr, twice, &calls) !=
      AMDGPU_DROPIN_HOSTCALL_OK) {
    failures++;
  }
  uint64_t lanes[64][8];
  std::memset(lanes, 0, sizeof(lanes));
  lanes[3][0] = 21;
  if (device_sim_hostcall(buffer, 200, 1ull << 3, lanes, 0) != DEVICE_SIM_OK || lanes[3][0] != 42 ||
      calls != 1) {
    failures++;
  }
  if (amdgpu_dropin_hostcall_unregister_handler(200, nullptr) != AMDGPU_DROPIN_HOSTCALL_OK) failures++;
  failures += wrapped_handlers_catch(buffer);
  failures += wrapped_sink_and_poll_catch();
  disableHostcalls(buffer, nullptr);
  std::free(buffer);
  std::printf("%s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

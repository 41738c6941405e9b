// integrations/rocclr/devhostcall.cpp compiled against the stand-in ROCclr
// (standin/), driven by the device simulator's waves on the software HSA
// runtime. Built once per tree and layout (see CMakeLists.txt):
//   STANDIN_ROCCLR_2026     the 2026 tree (hostcall-memory tracking, aligned Buffer)
//   USE_NEW_HOSTCALL_IMPL   the phase-bit layout (4-argument enableHostcalls)
//   AMDGPU_DROPIN_ROCCLR_TEST_ASAN_ROUTE  SANITIZER through handleSanitizerService
//   STANDIN_ROCCLR_RPC      an RPC tree (enableRpc in devhostcall.hpp, devrpc.hpp);
//                           STANDIN_ROCCLR_RPC_SINGLE its 22d8a787 form
#include "standin/standin_rocclr.hpp"
#if defined(STANDIN_ROCCLR_RPC)
#include "standin_rpc/device/devrpc.hpp"
#endif

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

#include "amdgpu_dropin_hostcall.h"
#include "hc_test.h"
extern "C" {
#include "device_sim.h"
#include "device_sim_phase.h"
#include "device_sim_services.h"
#include "pf_device.h"
}

namespace amd {
// Defined by the stand-in, as by ROCclr's platform/runtime.cpp.
extern Monitor listenerLock;
}  // namespace amd

namespace {

constexpr uint64_t kTimeoutNs = 10ull * 1000 * 1000 * 1000;
constexpr uint32_t kPackets = 8;

#if defined(USE_NEW_HOSTCALL_IMPL)
constexpr uint32_t kProtocol = AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT;
constexpr bool kPhaseBit = true;
#else
constexpr uint32_t kProtocol = AMDGPU_DROPIN_HOSTCALL_PROTOCOL_CLASSIC;
constexpr bool kPhaseBit = false;
#endif

#if defined(STANDIN_ROCCLR_2026)
constexpr bool kTree2026 = true;
#else
constexpr bool kTree2026 = false;
#endif

#if defined(STANDIN_ROCCLR_ASAN)
constexpr bool kAsanRoute = true;
#else
constexpr bool kAsanRoute = false;
#endif

// A hostcall buffer as ROCclr's Device::getOrCreateHostcallBuffer makes one:
// getHostcallBufferSize bytes with getHostcallBufferAlignment, and (phase-bit)
// a zeroed occupancy bitmap in the device's memory, owned by the buffer
// from a successful enable on.
struct HostcallBuffer {
  void* memory = nullptr;
  amd::Memory* occupied = nullptr;
};

amd::Memory* newBitmap(amd::Device& dev, size_t size) {
  amd::Context& ctx = dev.context();
  amd::Memory* bitmap = new (ctx) amd::Buffer(ctx, CL_MEM_READ_WRITE, size);
  if (bitmap == nullptr || !bitmap->create()) return nullptr;
  auto va = bitmap->getDeviceMemory(dev)->virtualAddress();
  std::memset(reinterpret_cast<void*>(static_cast<uintptr_t>(va)), 0, size);
  return bitmap;
}

HostcallBuffer allocBuffer(amd::Device& dev, uint32_t packets = kPackets) {
  HostcallBuffer b;
  size_t size = amd::getHostcallBufferSize(packets);
  if (posix_memalign(&b.memory, amd::getHostcallBufferAlignment() < 4096 ? 4096 : amd::getHostcallBufferAlignment(),
                     size) != 0) {
    b.memory = nullptr;
    return b;
  }
  std::memset(b.memory, 0, size);
  if (kPhaseBit) {
    b.occupied = newBitmap(dev, amdgpu_dropin_hostcall_occupancy_size(packets));
    device_sim_phase_attach(b.memory);
  }
  (void)dev;
  return b;
}

bool enable(amd::Device& dev, HostcallBuffer& b, uint32_t packets = kPackets) {
#if defined(USE_NEW_HOSTCALL_IMPL)
  return amd::enableHostcalls(dev, b.memory, packets, b.occupied);
#else
  return amd::enableHostcalls(dev, b.memory, packets);
#endif
}

// After disableHostcalls (which released the bitmap of an enabled buffer).
void freeBuffer(HostcallBuffer& b) {
  if (kPhaseBit) device_sim_phase_detach(b.memory);
  std::free(b.memory);
  b.memory = nullptr;
  b.occupied = nullptr;
}

// One lane's DEVMEM request; returns slot[0] of the answer.
uint64_t devmem(void* buffer, uint64_t address, uint64_t size) {
  uint64_t addresses[64] = {0}, sizes[64] = {0}, answers[64] = {0};
  addresses[0] = address;
  sizes[0] = size;
  int rc = device_sim_devmem_request(buffer, 1, addresses, sizes, answers, kTimeoutNs);
  DROPIN_CHECK_MSG(rc == DEVICE_SIM_OK, "devmem request: %s", device_sim_error_string(rc));
  return answers[0];
}

// ---- Cases ------------------------------------------------------------------

void test_sizes() {
  for (uint32_t n : {1u, 2u, 8u, 100u, 4096u}) {
    DROPIN_CHECK_MSG(amd::getHostcallBufferSize(n) == amdgpu_dropin_hostcall_buffer_size(kProtocol, n),
             "size of %u packets", n);
  }
  size_t expected = kPhaseBit ? device_sim_phase_buffer_size(8) : device_sim_buffer_size(8);
  DROPIN_CHECK_MSG(amd::getHostcallBufferSize(8) == expected, "size %zu, the simulator's %zu",
           amd::getHostcallBufferSize(8), expected);
  DROPIN_CHECK_MSG(amd::getHostcallBufferAlignment() == 8, "alignment %u", amd::getHostcallBufferAlignment());
}

void test_function_call_and_printf() {
  amd::Device dev(0);
  long live0 = amd::standin::live_memory();
  HostcallBuffer b = allocBuffer(dev);
  DROPIN_REQUIRE_MSG(enable(dev, b), "enable");
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(b.memory, ~0ull, 7, kTimeoutNs) == 0, "function call, 64 lanes");
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(b.memory, 0x5, 8, kTimeoutNs) == 0, "function call, 2 lanes");

  static pf_message_t message;
  pf_arg_t args[2] = {pf_i32(42), pf_str("rocclr")};
  DROPIN_REQUIRE_MSG(pf_encode(&message, PF_PER_ARGUMENT, 0, "hello %d from %s\n", args, 2), "encode");
  uint64_t result = 0;
  pf_capture_begin();
  int rc = pf_send(b.memory, &message, &result);
  char *out = nullptr, *err = nullptr;
  size_t out_len = 0, err_len = 0;
  pf_capture_end(&out, &out_len, &err, &err_len);
  DROPIN_CHECK_MSG(rc == 0, "printf send: %d", rc);
  DROPIN_CHECK_MSG(out != nullptr && std::string(out, out_len) == "hello 42 from rocclr\n", "printf output '%s'",
           out != nullptr ? out : "");
  DROPIN_CHECK_MSG(result == 21, "printf returned %llu", static_cast<unsigned long long>(result));
  std::free(out);
  std::free(err);

  amd::disableHostcalls(b.memory);
  freeBuffer(b);
  // The bitmap (phase-bit) went with the disable.
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0, "live memory objects %ld, before %ld",
           amd::standin::live_memory(), live0);
}

void test_devmem() {
  amd::Device dev(0);
  HostcallBuffer b = allocBuffer(dev);
  DROPIN_REQUIRE_MSG(enable(dev, b), "enable");
  long live0 = amd::standin::live_memory();
  size_t map0 = amd::MemObjMap::size();

  // One wave, four lanes, four sizes (2 MiB among them).
  uint64_t addresses[64] = {0}, sizes[64] = {0}, answers[64] = {0};
  const uint64_t wanted[4] = {64, 2 * amd::Mi, 4096, 100};
  for (int i = 0; i < 4; ++i) sizes[i] = wanted[i];
  DROPIN_REQUIRE_MSG(device_sim_devmem_request(b.memory, 0xF, addresses, sizes, answers, kTimeoutNs) == 0,
             "devmem allocate");
  for (int i = 0; i < 4; ++i) {
    DROPIN_CHECK_MSG(answers[i] != 0, "lane %d got no memory", i);
    DROPIN_CHECK_MSG(amd::standin::context_of(answers[i]) == &dev.context(), "lane %d: block not in the device's context", i);
    long alignment = amd::standin::alignment_of(answers[i]);
    long expected = (kTree2026 && wanted[i] == 2 * amd::Mi) ? static_cast<long>(2 * amd::Mi) : 0;
    DROPIN_CHECK_MSG(alignment == expected, "lane %d (%llu bytes): alignment %ld, expected %ld", i,
             static_cast<unsigned long long>(wanted[i]), alignment, expected);
    // Use it: the simulated device memory is host memory.
    std::memset(reinterpret_cast<void*>(static_cast<uintptr_t>(answers[i])), i, wanted[i]);
  }
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0 + 4, "live %ld, expected %ld", amd::standin::live_memory(),
           live0 + 4);
  DROPIN_CHECK_MSG(amd::MemObjMap::size() == map0 + 4, "MemObjMap holds %zu", amd::MemObjMap::size());
#if defined(STANDIN_ROCCLR_2026)
  DROPIN_CHECK_MSG(dev.trackedHostcallMemory() == 4, "device tracks %zu blocks", dev.trackedHostcallMemory());
#endif

  // Free them in one wave.
  uint64_t frees[64] = {0}, zero[64] = {0};
  for (int i = 0; i < 4; ++i) frees[i] = answers[i];
  DROPIN_CHECK_MSG(device_sim_devmem_request(b.memory, 0xF, frees, zero, answers, kTimeoutNs) == 0, "devmem free");
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0, "live %ld after the frees, expected %ld",
           amd::standin::live_memory(), live0);
  DROPIN_CHECK_MSG(amd::MemObjMap::size() == map0, "MemObjMap holds %zu after the frees", amd::MemObjMap::size());
#if defined(STANDIN_ROCCLR_2026)
  DROPIN_CHECK_MSG(dev.trackedHostcallMemory() == 0, "device tracks %zu blocks after the frees",
           dev.trackedHostcallMemory());
#endif

  // Blocks left at disable stay ROCclr's, as with ROCclr's own file: the
  // device heap is per device, other queues may still use them.
  uint64_t kept = devmem(b.memory, 0, 256);
  DROPIN_CHECK_MSG(kept != 0, "allocation");
  amd::disableHostcalls(b.memory);
  freeBuffer(b);
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0 - (kPhaseBit ? 1 : 0) + 1, "live %ld after disable",
           amd::standin::live_memory());
#if defined(STANDIN_ROCCLR_2026)
  // The device's own cleanup releases what it tracks.
  dev.releaseHostcallMemory();
#else
  // ROCclr of 2024 leaves them to the process; the test frees them.
  amd::Memory* mem = amd::MemObjMap::FindMemObj(reinterpret_cast<void*>(static_cast<uintptr_t>(kept)));
  DROPIN_REQUIRE_MSG(mem != nullptr, "kept block is in MemObjMap");
  amd::MemObjMap::RemoveMemObj(reinterpret_cast<void*>(static_cast<uintptr_t>(kept)));
  mem->release();
#endif
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0 - (kPhaseBit ? 1 : 0), "live %ld at the end",
           amd::standin::live_memory());
  DROPIN_CHECK_MSG(amd::MemObjMap::size() == map0, "MemObjMap holds %zu at the end", amd::MemObjMap::size());
}

void test_devmem_failures() {
  amd::Device dev(0);
  HostcallBuffer b = allocBuffer(dev);
  DROPIN_REQUIRE_MSG(enable(dev, b), "enable");
  long live0 = amd::standin::live_memory();
  size_t map0 = amd::MemObjMap::size();
  amd::standin::log_clear();

  amd::standin::fail_next_creates(1);
  DROPIN_CHECK_MSG(devmem(b.memory, 0, 4096) == 0, "create() failing answers 0");
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0, "create() failing: the buffer was released");

  // Exceptions in the service answer 0, "no memory" (never an error value
  // the device heap would take for an address), and leave nothing behind.
  amd::standin::fail_next_news(1);
  DROPIN_CHECK_MSG(devmem(b.memory, 0, 4096) == 0, "operator new throwing answers 0");
  amd::standin::fail_next_map_inserts(1);
  DROPIN_CHECK_MSG(devmem(b.memory, 0, 4096) == 0, "MemObjMap throwing answers 0");
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0, "MemObjMap throwing: the buffer was released");
#if defined(STANDIN_ROCCLR_2026)
  amd::standin::fail_next_tracks(1);
  DROPIN_CHECK_MSG(devmem(b.memory, 0, 4096) == 0, "tracking throwing answers 0");
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0, "tracking throwing: the buffer was released");
  DROPIN_CHECK_MSG(dev.trackedHostcallMemory() == 0, "tracking throwing: nothing tracked");
#endif
  DROPIN_CHECK_MSG(amd::MemObjMap::size() == map0, "exceptions: nothing left in MemObjMap");
  DROPIN_CHECK_MSG(amd::standin::log_count("exception") >= 2, "exceptions logged");

  amd::standin::set_device_memory_mode(amd::standin::DeviceMemoryMode::kNull);
  DROPIN_CHECK_MSG(devmem(b.memory, 0, 4096) == 0, "no device memory answers 0");
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0, "no device memory: the buffer was released");
  amd::standin::set_device_memory_mode(amd::standin::DeviceMemoryMode::kZeroAddress);
  DROPIN_CHECK_MSG(devmem(b.memory, 0, 4096) == 0, "device address 0 answers 0");
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0, "device address 0: the buffer was released");
  amd::standin::set_device_memory_mode(amd::standin::DeviceMemoryMode::kNormal);
  DROPIN_CHECK_MSG(amd::MemObjMap::size() == map0, "nothing registered for failed allocations");

  // Unknown pointer, and a pointer inside a block: logged, nothing freed.
  devmem(b.memory, 0xdead0000, 0);
  DROPIN_CHECK_MSG(amd::standin::log_count("Unknown pointer") == 1, "unknown pointer logged once");
  uint64_t block = devmem(b.memory, 0, 4096);
  DROPIN_REQUIRE_MSG(block != 0, "allocation");
  devmem(b.memory, block + 64, 0);
  DROPIN_CHECK_MSG(amd::standin::log_count("inside a block") == 1, "interior pointer logged");
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0 + 1, "the block survives a free of its interior");

  // Both words 0: logged, answered 0, nothing else happens (ROCm/clr of 2024 aborts).
  uint64_t answer = devmem(b.memory, 0, 0);
  DROPIN_CHECK_MSG(answer == 0, "both-zero request answered %llu", static_cast<unsigned long long>(answer));
  DROPIN_CHECK_MSG(amd::standin::log_count("both 0") == 1, "both-zero request logged");
  bool logged_as_error = false;
  for (const auto& entry : amd::standin::log_entries()) {
    if (entry.text.find("both 0") != std::string::npos) logged_as_error = entry.level == amd::LOG_ERROR;
  }
  DROPIN_CHECK_MSG(logged_as_error, "both-zero request logged as an error");
  // Still served afterwards.
  devmem(b.memory, block, 0);
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0, "block freed");
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(b.memory, 1, 3, kTimeoutNs) == 0, "still serving");

  amd::disableHostcalls(b.memory);
  freeBuffer(b);
}

void test_sanitizer() {
  amd::Device dev(3);
  HostcallBuffer b = allocBuffer(dev);
  DROPIN_REQUIRE_MSG(enable(dev, b), "enable");
  uint64_t addresses[64] = {0};
  addresses[1] = 0x7000;
  addresses[4] = 0x7008;
  const uint64_t workgroup[3] = {1, 2, 3};
  size_t before = amd::standin::sanitizer_calls().size();
  pf_capture_begin();
  int rc = device_sim_sanitizer_report(b.memory, 0x12, addresses, 0x4242, workgroup, true, false, 4,
                                       kTimeoutNs);
  char *out = nullptr, *err = nullptr;
  size_t out_len = 0, err_len = 0;
  pf_capture_end(&out, &out_len, &err, &err_len);
  DROPIN_CHECK_MSG(rc == 0, "sanitizer report: %d", rc);
  auto calls = amd::standin::sanitizer_calls();
  bool printed = err != nullptr && hc_contains(err, "sanitizer");
  if (kAsanRoute) {
    DROPIN_CHECK_MSG(calls.size() == before + 1, "handleSanitizerService called %zu times", calls.size() - before);
    if (calls.size() == before + 1) {
      const auto& call = calls.back();
      DROPIN_CHECK_MSG(call.activemask == 0x12, "activemask %llx", static_cast<unsigned long long>(call.activemask));
      DROPIN_CHECK_MSG(call.device == &dev, "device");
      DROPIN_CHECK_MSG(call.uri_locator != nullptr, "a URI locator");
      DROPIN_CHECK_MSG(call.first_slot[0] == 0x7000 && call.first_slot[1] == 0x4242, "first lane's words");
    }
    DROPIN_CHECK_MSG(!printed, "the library's default printed too: %s", err != nullptr ? err : "");
  } else {
    DROPIN_CHECK_MSG(calls.size() == before, "handleSanitizerService called outside an ASan build");
    DROPIN_CHECK_MSG(printed, "no report printed by the default: '%s'", err != nullptr ? err : "");
  }
  std::free(out);
  std::free(err);
  amd::disableHostcalls(b.memory);
  freeBuffer(b);
}

void test_two_devices() {
  amd::Device dev_a(0), dev_b(1);
  int threads0 = hc_thread_count();
  HostcallBuffer a = allocBuffer(dev_a), b = allocBuffer(dev_b);
  DROPIN_REQUIRE_MSG(enable(dev_a, a), "enable a");
  DROPIN_REQUIRE_MSG(enable(dev_b, b), "enable b");
  // One listener thread serves both devices, with its lost-ring watch (which
  // the listener starts on its own thread, so it may come just after enable).
  DROPIN_CHECK_MSG(hc_wait_thread_count(threads0 + 2, 5000) == threads0 + 2,
           "%d threads with two devices' buffers, %d before", hc_thread_count(), threads0);
  uint64_t block_a = devmem(a.memory, 0, 512), block_b = devmem(b.memory, 0, 512);
  DROPIN_CHECK_MSG(amd::standin::context_of(block_a) == &dev_a.context(), "a's block in a's context");
  DROPIN_CHECK_MSG(amd::standin::context_of(block_b) == &dev_b.context(), "b's block in b's context");
#if defined(STANDIN_ROCCLR_2026)
  DROPIN_CHECK_MSG(dev_a.trackedHostcallMemory() == 1 && dev_b.trackedHostcallMemory() == 1, "tracked per device");
#endif
  devmem(a.memory, block_a, 0);
  devmem(b.memory, block_b, 0);
  amd::disableHostcalls(a.memory);
  freeBuffer(a);
  DROPIN_CHECK_MSG(hc_thread_count() == threads0 + 2, "the listener (and its watch) stays for b");
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(b.memory, 3, 9, kTimeoutNs) == 0, "b still served");
  amd::disableHostcalls(b.memory);
  freeBuffer(b);
  DROPIN_CHECK_MSG(hc_wait_thread_count(threads0, 5000) == threads0, "the last disable stops the listener");
}

void test_enable_failures() {
  amd::Device dev(0), other(1);
  long live0 = amd::standin::live_memory();
  amd::standin::log_clear();
  HostcallBuffer b = allocBuffer(dev);
#if defined(USE_NEW_HOSTCALL_IMPL)
  DROPIN_CHECK_MSG(!amd::enableHostcalls(dev, b.memory, kPackets, nullptr), "no bitmap");
  amd::standin::set_device_memory_mode(amd::standin::DeviceMemoryMode::kNull);
  DROPIN_CHECK_MSG(!amd::enableHostcalls(dev, b.memory, kPackets, b.occupied), "bitmap without device memory");
  amd::standin::set_device_memory_mode(amd::standin::DeviceMemoryMode::kZeroAddress);
  DROPIN_CHECK_MSG(!amd::enableHostcalls(dev, b.memory, kPackets, b.occupied), "bitmap at device address 0");
  amd::standin::set_device_memory_mode(amd::standin::DeviceMemoryMode::kNormal);
  DROPIN_CHECK_MSG(!amd::enableHostcalls(other, b.memory, kPackets, b.occupied), "bitmap of another device");
  amd::Memory* small = newBitmap(dev, 4);
  DROPIN_CHECK_MSG(!amd::enableHostcalls(dev, b.memory, 64, small), "bitmap too small for 64 packets");
  small->release();
#else
  DROPIN_CHECK_MSG(!amd::enableHostcalls(dev, b.memory, 1), "one packet");
#endif
  HostcallBuffer null_buffer{nullptr, b.occupied};
  DROPIN_CHECK_MSG(!enable(dev, null_buffer), "null buffer");
  void* memory = nullptr;
  DROPIN_REQUIRE_MSG(posix_memalign(&memory, 4096, amd::getHostcallBufferSize(kPackets) + 8) == 0, "alloc");
  HostcallBuffer misaligned{static_cast<char*>(memory) + 4, b.occupied};
  DROPIN_CHECK_MSG(!enable(dev, misaligned), "misaligned buffer");
  std::free(memory);
  DROPIN_CHECK_MSG(amd::standin::log_count("Failed") >= 1, "failures logged");
  // A failed enable leaves nothing behind: the same buffer enables now,
  // with the adapter's DEVMEM.
  DROPIN_REQUIRE_MSG(enable(dev, b), "enable after the failures");
  uint64_t first = devmem(b.memory, 0, 64);
  DROPIN_CHECK_MSG(first != 0 && amd::standin::context_of(first) == &dev.context(), "DEVMEM after the failures");
  devmem(b.memory, first, 0);
  amd::disableHostcalls(b.memory);
  freeBuffer(b);
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0, "failed enables keep no object (live %ld, before %ld)",
           amd::standin::live_memory(), live0);

  // A buffer enabled twice: the second fails, the first still works, and
  // its services are the adapter's (DEVMEM through ROCclr's objects).
  HostcallBuffer c = allocBuffer(dev);
  DROPIN_REQUIRE_MSG(enable(dev, c), "enable");
  DROPIN_CHECK_MSG(!enable(dev, c), "enabled twice");
  uint64_t block = devmem(c.memory, 0, 128);
  DROPIN_CHECK_MSG(block != 0 && amd::standin::context_of(block) == &dev.context(), "DEVMEM still ROCclr's");
  devmem(c.memory, block, 0);
  amd::disableHostcalls(c.memory);
  freeBuffer(c);
  // Disabling an unknown buffer: logged, nothing else.
  amd::standin::log_clear();
  int unknown = 0;
  amd::disableHostcalls(&unknown);
  DROPIN_CHECK_MSG(amd::standin::log_count("not registered") == 1, "unknown buffer logged");
  DROPIN_CHECK_MSG(amd::standin::live_memory() == live0, "live %ld at the end", amd::standin::live_memory());
}

// Child: exit() while waves call and a DEVMEM block is out.
int child_exit_in_use() {
  hc_hsa_init();
  static amd::Device* dev = new amd::Device(0);  // as ROCclr's devices: never destroyed before exit
  HostcallBuffer b = allocBuffer(*dev);
  if (!enable(*dev, b)) return 10;
  if (devmem(b.memory, 0, 1024) == 0) return 11;
  void* buffers[1] = {b.memory};
  device_sim_waves_config_t config = device_sim_waves_config(buffers, 1, 4, 0, 5, kTimeoutNs);
  device_sim_waves_t* waves = device_sim_waves_start(&config);
  if (waves == nullptr) return 12;
  // DEVMEM traffic too: exit may come while the listener is in a DEVMEM
  // service, holding listenerLock.
  std::thread([b] {
    for (;;) {
      uint64_t block = devmem(b.memory, 0, 4096);
      if (block != 0) devmem(b.memory, block, 0);
    }
  }).detach();
  hc_sleep_ms(50);
  std::exit(0);
}

void test_exit_in_use() {
  hc_child_result_t result;
  DROPIN_REQUIRE_MSG(hc_spawn_child("exit_in_use", nullptr, 30000, &result), "spawn");
  DROPIN_CHECK_MSG(result.exited && result.exit_code == 0, "child: %s", hc_child_describe(&result));
}

// Child: stdout is the file $ROCCLR_TEST_STDOUT, fully buffered, as a
// redirected stdout is. Host lines are printed without a flush, each followed
// by a device printf; the child ends with _exit, which flushes nothing.
int child_printf_order() {
  const char* path = std::getenv("ROCCLR_TEST_STDOUT");
  if (path == nullptr || std::freopen(path, "w", stdout) == nullptr) return 30;
  static char stdoutBuffer[1 << 16];
  if (std::setvbuf(stdout, stdoutBuffer, _IOFBF, sizeof(stdoutBuffer)) != 0) return 31;
  hc_hsa_init();
  static amd::Device* dev = new amd::Device(0);
  HostcallBuffer b = allocBuffer(*dev);
  if (!enable(*dev, b)) return 32;
  static pf_message_t message;
  for (int i = 0; i < 3; ++i) {
    std::printf("host %d\n", i);
    pf_arg_t args[1] = {pf_i32(i)};
    if (!pf_encode(&message, PF_PER_ARGUMENT, 0, "device %d\n", args, 1)) return 33;
    uint64_t result = 0;
    if (pf_send(b.memory, &message, &result) != 0 || result != 9) return 34;
  }
  // Still in stdio's buffer at _exit: lost, as any unflushed host output.
  std::printf("host unflushed\n");
  _exit(0);
}

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ROCCLR_TEST_CLANG_TSAN 1
#endif
#endif
#ifndef ROCCLR_TEST_CLANG_TSAN
#define ROCCLR_TEST_CLANG_TSAN 0
#endif

// Device printf goes through the C stream: in order with the host's earlier,
// still buffered stdout output, and out before _exit (ROCclr's own listener
// printed with vfprintf into stdout; a write to fd 1 would land before the
// buffered host lines, which _exit then drops).
void test_printf_order_with_host_stdio() {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir != nullptr && *dir != '\0' ? dir : P_tmpdir) + "/rocclr_printf_order_XXXXXX";
  std::vector<char> path(pattern.begin(), pattern.end());
  path.push_back('\0');
  int fd = mkstemp(path.data());
  DROPIN_REQUIRE_MSG(fd >= 0, "mkstemp");
  close(fd);
  std::string env = std::string("ROCCLR_TEST_STDOUT=") + path.data();
  const char* envs[] = {env.c_str(), nullptr};
  hc_child_result_t result;
  bool spawned = hc_spawn_child("printf_order", envs, 30000, &result);
  std::string text;
  if (FILE* f = std::fopen(path.data(), "r")) {
    char chunk[256];
    size_t n;
    while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) text.append(chunk, n);
    std::fclose(f);
  }
  unlink(path.data());
  DROPIN_REQUIRE_MSG(spawned, "spawn");
  DROPIN_CHECK_MSG(result.exited && result.exit_code == 0, "child: %s", hc_child_describe(&result));
  // ThreadSanitizer's _exit flushes stdio, so the last host line is not lost
  // there; the order of every line before it is checked all the same.
#if defined(__SANITIZE_THREAD__) || ROCCLR_TEST_CLANG_TSAN
  const char* expected = "host 0\ndevice 0\nhost 1\ndevice 1\nhost 2\ndevice 2\nhost unflushed\n";
#else
  const char* expected = "host 0\ndevice 0\nhost 1\ndevice 1\nhost 2\ndevice 2\n";
#endif
  DROPIN_CHECK_MSG(text == expected, "stdout of the child:\n%s(expected:\n%s)", text.c_str(), expected);
}

// Parent enabled with traffic; the forked child uses the adapter on its own.
int child_after_fork() {
  amd::Device dev(5);
  HostcallBuffer b = allocBuffer(dev);
  if (!enable(dev, b)) return 20;
  if (device_sim_fc_checked_call(b.memory, 0xff, 4, kTimeoutNs) != 0) return 21;
  uint64_t block = devmem(b.memory, 0, 2048);
  if (block == 0) return 22;
  devmem(b.memory, block, 0);
  amd::disableHostcalls(b.memory);
  freeBuffer(b);
  return amd::standin::violations() == 0 ? 0 : 23;
}

void test_fork_in_use() {
  HC_SKIP_FORK_UNDER_TSAN();
  amd::Device dev(0);
  HostcallBuffer b = allocBuffer(dev);
  DROPIN_REQUIRE_MSG(enable(dev, b), "enable");
  void* buffers[1] = {b.memory};
  device_sim_waves_config_t config = device_sim_waves_config(buffers, 1, 2, 0, 11, kTimeoutNs);
  device_sim_waves_t* waves = device_sim_waves_start(&config);
  DROPIN_REQUIRE_MSG(waves != nullptr, "waves");
  uint64_t block = devmem(b.memory, 0, 4096);
  device_sim_waves_result_t waves_result;
#if defined(__SANITIZE_ADDRESS__)
  // The waves stop and the listener falls asleep before the fork (see
  // hc_listeners_asleep); the plain build forks in the middle of the traffic.
  device_sim_waves_stop(waves);
  DROPIN_CHECK_MSG(device_sim_waves_join(waves, &waves_result) == 0, "parent's waves: %s", waves_result.first_failure);
  waves = nullptr;
  for (int tries = 0; tries < 1000 && !hc_listeners_asleep(); ++tries) usleep(1000);
#endif
  hc_child_result_t result;
  bool forked = hc_fork_child(child_after_fork, 30000, &result);
  DROPIN_CHECK_MSG(forked, "fork");
  if (forked) DROPIN_CHECK_MSG(result.exited && result.exit_code == 0, "child: %s", hc_child_describe(&result));
  if (waves != nullptr) {
    device_sim_waves_stop(waves);
    DROPIN_CHECK_MSG(device_sim_waves_join(waves, &waves_result) == 0, "parent's waves: %s", waves_result.first_failure);
  }
  devmem(b.memory, block, 0);
  amd::disableHostcalls(b.memory);
  freeBuffer(b);
}

int32_t foreignDevmem(void* user, void* buffer, uint32_t service, uint32_t lane, uint64_t* slot) {
  (void)user, (void)buffer, (void)service, (void)lane;
  slot[0] = 0;
  return 0;
}

// A failed enable undoes only what it did: handlers someone else registered
// (process-wide, or for this very buffer) stay.
void test_failed_enable_keeps_foreign_handlers() {
  amd::Device dev(0);
  HostcallBuffer b = allocBuffer(dev);
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(AMDGPU_DROPIN_HOSTCALL_SERVICE_DEVMEM, nullptr,
                                                          foreignDevmem, nullptr) == AMDGPU_DROPIN_HOSTCALL_OK,
             "process-wide handler");
  HostcallBuffer null_buffer{nullptr, b.occupied};
  DROPIN_CHECK_MSG(!enable(dev, null_buffer), "null buffer");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(AMDGPU_DROPIN_HOSTCALL_SERVICE_DEVMEM, nullptr) ==
               AMDGPU_DROPIN_HOSTCALL_OK,
           "the process-wide DEVMEM handler was removed by a failed enable");
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(AMDGPU_DROPIN_HOSTCALL_SERVICE_DEVMEM, b.memory,
                                                          foreignDevmem, nullptr) == AMDGPU_DROPIN_HOSTCALL_OK,
             "per-buffer handler");
  DROPIN_CHECK_MSG(!enable(dev, b), "enable over another DEVMEM handler of the buffer");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(AMDGPU_DROPIN_HOSTCALL_SERVICE_DEVMEM, b.memory) ==
               AMDGPU_DROPIN_HOSTCALL_OK,
           "the buffer's own DEVMEM handler was removed by a failed enable");
  // Nothing of it left either: the buffer enables now.
  DROPIN_REQUIRE_MSG(enable(dev, b), "enable");
  amd::disableHostcalls(b.memory);
  freeBuffer(b);
}

int child_enable_after_fork() {
  // The child's thread calls ROCclr as an application thread would (HIP
  // makes it an amd::Thread).
  amd::standin::enter_as_rocclr_thread();
  amd::Device dev(7);
  HostcallBuffer b = allocBuffer(dev);
  if (!enable(dev, b)) return 30;
  uint64_t block = devmem(b.memory, 0, 64);
  if (block == 0) return 31;
  devmem(b.memory, block, 0);
  amd::disableHostcalls(b.memory);
  freeBuffer(b);
  return 0;
}

// Forks while the listener is inside DEVMEM services (holding listenerLock):
// the child must still enable and allocate.
void test_fork_during_devmem() {
  HC_SKIP_FORK_UNDER_TSAN();
  amd::Device dev(0);
  HostcallBuffer b = allocBuffer(dev);
  DROPIN_REQUIRE_MSG(enable(dev, b), "enable");
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> rounds{0};
  std::atomic<bool> pause_traffic{false}, traffic_paused{false};
  std::thread traffic([&] {
    while (!stop.load()) {
      if (pause_traffic.load()) {
        traffic_paused.store(true);
        usleep(100);
        continue;
      }
      traffic_paused.store(false);
      uint64_t block = devmem(b.memory, 0, 4096);
      if (block != 0) devmem(b.memory, block, 0);
      rounds.fetch_add(1);
    }
  });
  while (rounds.load() < 10) std::this_thread::yield();
  for (int i = 0; i < 20; ++i) {
    hc_child_result_t result;
#if defined(__SANITIZE_ADDRESS__)
    // The traffic pauses and the listener falls asleep before each fork (see
    // hc_listeners_asleep); the plain build forks in the middle of it.
    pause_traffic.store(true);
    for (int tries = 0; tries < 1000 && !traffic_paused.load(); ++tries) usleep(1000);
    for (int tries = 0; tries < 1000 && !hc_listeners_asleep(); ++tries) usleep(1000);
#endif
    bool forked = hc_fork_child(child_enable_after_fork, 5000, &result);
    pause_traffic.store(false);
    DROPIN_CHECK_MSG(forked && result.exited && result.exit_code == 0, "fork %d: child %s", i,
             forked ? hc_child_describe(&result) : "did not start");
    if (!forked || !result.exited || result.exit_code != 0) break;
  }
  stop.store(true);
  traffic.join();
  amd::disableHostcalls(b.memory);
  freeBuffer(b);
}

// Item of issue 24: DEVMEM on both library threads (main listener and
// helper) while an application thread (an amd::HostThread, as HIP makes
// it) keeps taking listenerLock and MemObjMap's lock. On the 2024 tree only
// an amd::Thread may lock those monitors (the stand-in aborts otherwise, as
// a debug ROCclr does), so this needs the adapter to make its threads ones;
// and those registrations must go with the threads: three rounds, each
// with a new listener, leave no amd::Thread behind.
void test_library_threads() {
  long threads0 = amd::standin::live_threads();
  for (int round = 0; round < 3; ++round) {
    int os_threads0 = hc_thread_count();
    amd::Device dev_a(0), dev_b(1), dev_app(2);
    HostcallBuffer a = allocBuffer(dev_a), b = allocBuffer(dev_b);
    DROPIN_REQUIRE_MSG(enable(dev_a, a), "enable a");
    DROPIN_REQUIRE_MSG(enable(dev_b, b), "enable b");
    // The application's own block, which its thread keeps adding to,
    // looking up in and removing from MemObjMap.
    amd::Context& app_ctx = dev_app.context();
    amd::Memory* app_block = new (app_ctx) amd::Buffer(app_ctx, CL_MEM_READ_WRITE, 4096);
    DROPIN_REQUIRE_MSG(app_block->create(), "application block");
    auto app_va = reinterpret_cast<void*>(
        static_cast<uintptr_t>(app_block->getDeviceMemory(dev_app)->virtualAddress()));
    // a's allocations are slow: the library moves a to its helper, so both
    // library threads serve DEVMEM at once.
    amd::standin::set_create_delay(&dev_a.context(), 3000);
    amd::standin::reset_creating_threads();

    std::atomic<bool> stop{false};
    std::atomic<long> app_rounds{0};
    std::thread app([&] {
      amd::standin::enter_as_rocclr_thread();
      while (!stop.load()) {
        {
          amd::ScopedLock lock(amd::listenerLock);
          std::this_thread::yield();
        }
        amd::MemObjMap::AddMemObj(app_va, app_block);
        size_t offset = 1;
        if (amd::MemObjMap::FindMemObj(app_va, &offset) != app_block || offset != 0) {
          amd::standin::violation("application lookup failed");
        }
        amd::MemObjMap::RemoveMemObj(app_va);
        app_rounds.fetch_add(1);
      }
      amd::standin::leave_as_rocclr_thread();
    });
    std::atomic<int> bad{0};
    // Allocations in runs of 4, then their frees: a's runs of slow visits
    // (a fast free would end the streak) move a to the helper.
    auto traffic = [&](HostcallBuffer& buffer, amd::Device& dev, int runs) {
      for (int i = 0; i < runs; ++i) {
        uint64_t blocks[4];
        for (uint64_t& block : blocks) {
          block = devmem(buffer.memory, 0, 256);
          if (block == 0 || amd::standin::context_of(block) != &dev.context()) bad.fetch_add(1);
        }
        for (uint64_t block : blocks) {
          if (block != 0) devmem(buffer.memory, block, 0);
        }
      }
    };
    std::thread slow([&] { traffic(a, dev_a, 10); });
    traffic(b, dev_b, 100);
    slow.join();
    while (app_rounds.load() < 10) std::this_thread::yield();
    stop.store(true);
    app.join();
    amd::standin::set_create_delay(&dev_a.context(), 0);
    DROPIN_CHECK_MSG(bad.load() == 0, "round %d: %d allocations failed or in the wrong context", round, bad.load());
    // Counted, not timed: the slow buffer went to the helper, so DEVMEM ran
    // on two library threads.
    DROPIN_CHECK_MSG(amd::standin::creating_threads() >= 2, "round %d: DEVMEM ran on %zu thread(s)", round,
                     amd::standin::creating_threads());
    amd::disableHostcalls(a.memory);
    amd::disableHostcalls(b.memory);
    freeBuffer(a);
    freeBuffer(b);
    app_block->release();
    DROPIN_CHECK_MSG(hc_wait_thread_count(os_threads0, 5000) == os_threads0, "round %d: the listener stops", round);
    DROPIN_CHECK_MSG(amd::standin::live_threads() == threads0, "round %d: %ld amd::Thread objects alive, %ld before",
                     round, amd::standin::live_threads(), threads0);
  }
}

// Entries from threads that are no amd::Thread (not ROCclr's callers, but
// they must not crash either): enable, DEVMEM, disable and fork from a
// plain thread, which is an amd::Thread for the call only.
void test_plain_thread_entries() {
  amd::Device dev(0);
  HostcallBuffer b = allocBuffer(dev);
  long threads0 = amd::standin::live_threads();
  bool enabled = false, forked = false;
  uint64_t block = 0;
  hc_child_result_t result{};
  std::thread plain([&] {
    enabled = enable(dev, b);
    if (!enabled) return;
    block = devmem(b.memory, 0, 512);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    // The fork handlers lock listenerLock from this thread.
    forked = hc_fork_child(child_enable_after_fork, 5000, &result);
#else
    forked = true;
    result.exited = true;
#endif
    amd::disableHostcalls(b.memory);
  });
  plain.join();
  DROPIN_CHECK_MSG(enabled, "enable from a plain thread");
  DROPIN_CHECK_MSG(block != 0, "DEVMEM after an enable from a plain thread");
  DROPIN_CHECK_MSG(forked && result.exited && result.exit_code == 0, "fork from a plain thread: %s",
                   forked ? hc_child_describe(&result) : "did not start");
  DROPIN_CHECK_MSG(amd::standin::live_threads() == threads0, "%ld amd::Thread objects alive, %ld before",
                   amd::standin::live_threads(), threads0);
  if (block != 0) {
    amd::Memory* mem = amd::MemObjMap::FindMemObj(reinterpret_cast<void*>(static_cast<uintptr_t>(block)));
    DROPIN_REQUIRE_MSG(mem != nullptr, "block in MemObjMap");
#if defined(STANDIN_ROCCLR_2026)
    dev.releaseHostcallMemory();
#else
    amd::MemObjMap::RemoveMemObj(reinterpret_cast<void*>(static_cast<uintptr_t>(block)));
    mem->release();
#endif
  }
  freeBuffer(b);
}

#if defined(STANDIN_ROCCLR_RPC)
// ---- RPC buffers (the trees whose devhostcall.hpp declares enableRpc) -----

namespace rpc = amd::standin::rpc;
constexpr uint32_t kRpcPorts = 4;

void* allocRpcBuffer(uint32_t ports = kRpcPorts) {
  void* buffer = nullptr;
  size_t size = amd::getRpcBufferSize(64, ports);
  if (posix_memalign(&buffer, 4096, size) != 0) return nullptr;
  std::memset(buffer, 0, size);
  return buffer;
}

// FUNCTION_CALL's host function: sum and xor of the 7 inputs.
extern "C" void rpcSumXor(uint64_t* out, const uint64_t* in) {
  out[0] = 0;
  out[1] = 0;
  for (int i = 0; i < 7; ++i) {
    out[0] += in[i];
    out[1] ^= in[i];
  }
}

bool rpcFunctionCall(void* buffer, uint64_t salt) {
  uint64_t words[8] = {reinterpret_cast<uintptr_t>(&rpcSumXor), salt, 1, 2, 3, 4, 5, 6};
  if (rpc::call(buffer, kRpcPorts, ROCM_HOSTCALL_FUNCTION, words, kTimeoutNs) != 0) return false;
  return words[0] == salt + 21 && words[1] == (salt ^ 1 ^ 2 ^ 3 ^ 4 ^ 5 ^ 6);
}

void waitListenersAsleep() {
  for (int tries = 0; tries < 1000 && !hc_listeners_asleep(); ++tries) usleep(1000);
}

void test_rpc_round_trip() {
  amd::Device dev(0);
  void* buffer = allocRpcBuffer();
  DROPIN_REQUIRE_MSG(buffer != nullptr, "allocate");
  long violations0 = amd::standin::violations();
  int threads0 = hc_thread_count();
  DROPIN_REQUIRE_MSG(amd::enableRpc(dev, buffer, kRpcPorts), "enableRpc");
  DROPIN_CHECK_MSG(hc_wait_thread_count(threads0 + 2, 5000) == threads0 + 2,
           "no listener thread (and its watch) for the RPC buffer alone");
  DROPIN_CHECK_MSG(rpc::doorbell(buffer) != 0, "initRpcDoorbell was not called with the listener's doorbell");
  int served = 0;
  for (uint64_t i = 0; i < 64; ++i) served += rpcFunctionCall(buffer, i * 1000) ? 1 : 0;
  DROPIN_CHECK_MSG(served == 64, "%d of 64 RPC function calls answered right", served);

  // PRINTF goes to ROCclr's MessageHandler, through devrpc.cpp.
  long printf0 = rpc::printf_payloads();
  uint64_t words[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  DROPIN_CHECK_MSG(rpc::call(buffer, kRpcPorts, ROCM_HOSTCALL_PRINTF, words, kTimeoutNs) == 0, "printf request");
  DROPIN_CHECK_MSG(rpc::printf_payloads() == printf0 + 1, "printf payloads %ld, expected %ld", rpc::printf_payloads(),
                   printf0 + 1);

  // A hostcall buffer beside it: one listener serves both.
  HostcallBuffer b = allocBuffer(dev);
  DROPIN_REQUIRE_MSG(enable(dev, b), "enable a hostcall buffer too");
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(b.memory, 0xff, 3, kTimeoutNs) == 0, "hostcall function call");
  DROPIN_CHECK_MSG(rpcFunctionCall(buffer, 77), "RPC call beside a hostcall buffer");
  amd::disableHostcalls(b.memory);
  freeBuffer(b);
  DROPIN_CHECK_MSG(rpcFunctionCall(buffer, 78), "RPC call after the hostcall buffer is gone");

  // flushRpc serves what is posted, on the caller's thread, without a ring.
  waitListenersAsleep();
  uint64_t quiet[8] = {reinterpret_cast<uintptr_t>(&rpcSumXor), 100, 0, 0, 0, 0, 0, 0};
  int port = rpc::post(buffer, kRpcPorts, ROCM_HOSTCALL_FUNCTION, quiet);
  DROPIN_REQUIRE_MSG(port >= 0, "post");
  long flushes0 = rpc::flush_calls(buffer);
  amd::flushRpc(buffer);
  DROPIN_CHECK_MSG(rpc::flush_calls(buffer) == flushes0 + 1, "flushRpc did not call flushRpcBuffer");
  DROPIN_CHECK_MSG(rpc::answered(buffer, port), "flushRpc returned with the posted request unanswered");
  DROPIN_CHECK(rpc::wait(buffer, port, quiet, kTimeoutNs) == 0 && quiet[0] == 100);

  // After disableRpc the buffer is never polled again.
  amd::disableRpc(buffer);
  long polls = rpc::process_calls(buffer) + rpc::flush_calls(buffer);
  uint64_t late[8] = {reinterpret_cast<uintptr_t>(&rpcSumXor), 5, 0, 0, 0, 0, 0, 0};
  port = rpc::post(buffer, kRpcPorts, ROCM_HOSTCALL_FUNCTION, late);
  rpc::ring(buffer);
  DROPIN_CHECK_MSG(hc_wait_thread_count(threads0, 5000) == threads0, "the listener did not stop after the last disable");
  DROPIN_CHECK_MSG(!rpc::answered(buffer, port), "a request posted after disableRpc was answered");
  DROPIN_CHECK_MSG(rpc::process_calls(buffer) + rpc::flush_calls(buffer) == polls, "the buffer was polled after disableRpc");
  std::free(buffer);
  DROPIN_CHECK_MSG(amd::standin::violations() == violations0, "%ld stand-in violations",
                   amd::standin::violations() - violations0);
}

// Several requests posted before one ring: all are served (the 22d8a787
// tree's processRpcBuffer serves one per call).
void test_rpc_burst() {
  amd::Device dev(0);
  void* buffer = allocRpcBuffer();
  DROPIN_REQUIRE_MSG(buffer != nullptr && amd::enableRpc(dev, buffer, kRpcPorts), "enableRpc");
  for (int round = 0; round < 20; ++round) {
    uint64_t words[kRpcPorts][8];
    int ports[kRpcPorts];
    for (uint32_t i = 0; i < kRpcPorts; ++i) {
      uint64_t init[8] = {reinterpret_cast<uintptr_t>(&rpcSumXor), uint64_t(round * 10 + i), 0, 0, 0, 0, 0, 0};
      std::memcpy(words[i], init, sizeof(init));
      ports[i] = rpc::post(buffer, kRpcPorts, ROCM_HOSTCALL_FUNCTION, words[i]);
    }
    rpc::ring(buffer);
    for (uint32_t i = 0; i < kRpcPorts; ++i) {
      DROPIN_CHECK_MSG(ports[i] >= 0 && rpc::wait(buffer, ports[i], words[i], kTimeoutNs) == 0 &&
                           words[i][0] == uint64_t(round * 10 + i),
                       "round %d, request %u not answered", round, i);
    }
  }
  amd::disableRpc(buffer);
  std::free(buffer);
}

void test_rpc_failures() {
  amd::Device dev(0);
  void* buffer = allocRpcBuffer();
  DROPIN_REQUIRE_MSG(buffer != nullptr, "allocate");
  amd::standin::log_clear();
  DROPIN_CHECK_MSG(!amd::enableRpc(dev, nullptr, kRpcPorts), "a null buffer was enabled");
  DROPIN_CHECK_MSG(!amd::enableRpc(dev, buffer, 0), "zero ports were enabled");
  DROPIN_CHECK_MSG(!amd::enableRpc(dev, buffer, static_cast<uint32_t>(amd::kMaxRpcPortCount) + 1),
                   "more than kMaxRpcPortCount ports were enabled");
  DROPIN_REQUIRE_MSG(amd::enableRpc(dev, buffer, kRpcPorts), "enableRpc");
  DROPIN_CHECK_MSG(!amd::enableRpc(dev, buffer, kRpcPorts), "a buffer was enabled twice");
  DROPIN_CHECK_MSG(rpcFunctionCall(buffer, 9), "the first registration stopped serving");
  int unknown = 0;
  amd::flushRpc(&unknown);
  amd::disableRpc(&unknown);
  DROPIN_CHECK_MSG(amd::standin::log_count("is not registered") == 2, "flush/disable of an unknown buffer: %zu logs",
                   amd::standin::log_count("is not registered"));
  amd::disableRpc(buffer);
  amd::disableRpc(buffer);
  DROPIN_CHECK_MSG(amd::standin::log_count("is not registered") == 3, "second disable was not refused");
  std::free(buffer);
}

// disableRpc waits for a poll in progress: the request's host function
// blocks until released and records, when it ends, whether disableRpc had
// already returned.
std::atomic<int> rpcBlocked{0}, rpcRelease{0}, rpcDisabled{0}, rpcDisabledSeen{-1};
extern "C" void rpcBlockingCall(uint64_t* out, const uint64_t* in) {
  (void)in;
  rpcBlocked = 1;
  while (!rpcRelease) std::this_thread::yield();
  rpcDisabledSeen = rpcDisabled.load();
  out[0] = 42;
  out[1] = 0;
}

void test_rpc_disable_waits_for_a_poll() {
  amd::Device dev(0);
  void* buffer = allocRpcBuffer();
  DROPIN_REQUIRE_MSG(buffer != nullptr && amd::enableRpc(dev, buffer, kRpcPorts), "enableRpc");
  // A hostcall buffer keeps the listener running: disableRpc must wait for
  // the poll itself, not for the listener to stop.
  HostcallBuffer keep = allocBuffer(dev);
  DROPIN_REQUIRE_MSG(enable(dev, keep), "enable a hostcall buffer");
  rpcBlocked = 0;
  rpcRelease = 0;
  rpcDisabled = 0;
  rpcDisabledSeen = -1;
  uint64_t words[8] = {reinterpret_cast<uintptr_t>(&rpcBlockingCall), 0, 0, 0, 0, 0, 0, 0};
  int port = rpc::post(buffer, kRpcPorts, ROCM_HOSTCALL_FUNCTION, words);
  rpc::ring(buffer);
  while (!rpcBlocked) std::this_thread::yield();
  std::thread disabler([buffer] {
    amd::disableRpc(buffer);
    rpcDisabled = 1;
  });
  for (int i = 0; i < 20000 && !rpcDisabled; ++i) std::this_thread::yield();
  DROPIN_CHECK_MSG(!rpcDisabled, "disableRpc returned while a poll of the buffer was running");
  rpcRelease = 1;
  disabler.join();
  DROPIN_CHECK_MSG(rpcDisabledSeen == 0, "the poll ended after disableRpc returned (%d)", rpcDisabledSeen.load());
  DROPIN_CHECK(port >= 0 && rpc::answered(buffer, port));
  amd::disableHostcalls(keep.memory);
  freeBuffer(keep);
  std::free(buffer);
}

// Idle, the listener sleeps: a few polls in 300 ms (its idle wait grows to
// IDLE_WAIT_MAX_MS), not thousands.
void test_rpc_idle_listener_sleeps() {
  amd::Device dev(0);
  void* buffer = allocRpcBuffer();
  DROPIN_REQUIRE_MSG(buffer != nullptr && amd::enableRpc(dev, buffer, kRpcPorts), "enableRpc");
  DROPIN_CHECK(rpcFunctionCall(buffer, 1));
  waitListenersAsleep();
  long before = rpc::process_calls(buffer) + rpc::flush_calls(buffer);
  hc_sleep_ms(300);
  long polls = rpc::process_calls(buffer) + rpc::flush_calls(buffer) - before;
  DROPIN_CHECK_MSG(polls <= 8, "%ld polls of an idle RPC buffer in 300 ms", polls);
  // A ring still wakes it.
  DROPIN_CHECK_MSG(rpcFunctionCall(buffer, 2), "a ring after the idle time was not served");
  amd::disableRpc(buffer);
  std::free(buffer);
}

// The forked child enables an RPC buffer of its own (the parent's record is
// not the child's).
int child_rpc_after_fork(void* parentBuffer) {
  amd::Device dev(6);
  if (!amd::enableRpc(dev, parentBuffer, kRpcPorts)) return 40;
  if (!rpcFunctionCall(parentBuffer, 3)) return 41;
  amd::disableRpc(parentBuffer);
  return amd::standin::violations() == 0 ? 0 : 42;
}
void* rpcForkBuffer = nullptr;
int child_rpc_fork() { return child_rpc_after_fork(rpcForkBuffer); }

void test_rpc_fork() {
  HC_SKIP_FORK_UNDER_TSAN();
  amd::Device dev(0);
  rpcForkBuffer = allocRpcBuffer();
  DROPIN_REQUIRE_MSG(rpcForkBuffer != nullptr && amd::enableRpc(dev, rpcForkBuffer, kRpcPorts), "enableRpc");
  DROPIN_CHECK(rpcFunctionCall(rpcForkBuffer, 4));
  waitListenersAsleep();
  hc_child_result_t result;
  bool forked = hc_fork_child(child_rpc_fork, 30000, &result);
  DROPIN_CHECK_MSG(forked && result.exited && result.exit_code == 0, "child: %s",
                   forked ? hc_child_describe(&result) : "did not start");
  DROPIN_CHECK_MSG(rpcFunctionCall(rpcForkBuffer, 5), "the parent's RPC buffer stopped after the fork");
  amd::disableRpc(rpcForkBuffer);
  std::free(rpcForkBuffer);
  rpcForkBuffer = nullptr;
}
#endif  // STANDIN_ROCCLR_RPC

const hc_child_case_t kChildren[] = {
    {"exit_in_use", child_exit_in_use}, {"printf_order", child_printf_order}, {nullptr, nullptr}};

}  // namespace

int main(int argc, char** argv) {
  // The test's thread is an application thread: HIP makes it an amd::Thread.
  amd::standin::enter_as_rocclr_thread();
  hc_child_main(argc, argv, kChildren);
  hc_hsa_init();
  printf("tree %s, %s layout, SANITIZER %s\n", kTree2026 ? "2026" : "2024", kPhaseBit ? "phase-bit" : "classic",
         kAsanRoute ? "to handleSanitizerService" : "to the library's default");
  HC_RUN(test_sizes);
  HC_RUN(test_function_call_and_printf);
  HC_RUN(test_printf_order_with_host_stdio);
  HC_RUN(test_devmem);
  HC_RUN(test_devmem_failures);
  HC_RUN(test_sanitizer);
  HC_RUN(test_two_devices);
  HC_RUN(test_enable_failures);
  HC_RUN(test_exit_in_use);
  HC_RUN(test_fork_in_use);
  HC_RUN(test_failed_enable_keeps_foreign_handlers);
  HC_RUN(test_fork_during_devmem);
  HC_RUN(test_library_threads);
  HC_RUN(test_plain_thread_entries);
#if defined(STANDIN_ROCCLR_RPC)
  HC_RUN(test_rpc_round_trip);
  HC_RUN(test_rpc_burst);
  HC_RUN(test_rpc_failures);
  HC_RUN(test_rpc_disable_waits_for_a_poll);
  HC_RUN(test_rpc_idle_listener_sleeps);
  HC_RUN(test_rpc_fork);
#endif
  DROPIN_CHECK_MSG(amd::standin::violations() == 0, "%ld stand-in ROCclr contract violations", amd::standin::violations());
  printf("%s\n", dropin_failures == 0 ? "PASS" : "FAIL");
  return dropin_failures == 0 ? 0 : 1;
}

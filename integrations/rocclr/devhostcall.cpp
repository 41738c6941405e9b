// amdgpu-dropin's replacement for ROCclr's rocclr/device/devhostcall.cpp.
//
// A ROCclr build compiles this file instead of its own devhostcall.cpp (see
// README.md beside it). It defines the four amd:: functions ROCclr's
// device/devhostcall.hpp declares, over amdgpu-dropin's C API: the library's
// listener serves FUNCTION_CALL and PRINTF (its output through C stdio, as
// ROCclr printed it, by a printf sink); DEVMEM and SANITIZER are served
// here, per buffer, through ROCclr's own objects (amd::Buffer, amd::MemObjMap,
// the device's hostcall-memory tracking where the tree has it, and
// handleSanitizerService in clang ASan builds).
//
// Layouts: built with USE_NEW_HOSTCALL_IMPL (as ROCclr's build defines it),
// enableHostcalls takes the occupancy bitmap and buffers use the phase-bit
// layout; otherwise the classic layout.
//
// Locking: everything this file keeps (the buffers it enabled) is guarded by
// ROCclr's amd::listenerLock, the lock ROCclr's own listener used; the DEVMEM
// and SANITIZER services also run under it, as ROCclr ran every service. The
// library's enable/disable are never called with it held (disable waits for
// a running service, which may be waiting for that lock).
//
// Threads: on trees whose amd::Monitor is the legacy monitor, only an
// amd::Thread may lock a ROCclr lock. The library's listener threads (and a
// thread that forks) are plain threads, so every entry here makes its
// thread an amd::HostThread first, as ROCclr's HSA signal handler does.

#if defined(WITH_PAL_DEVICE)
#error "amdgpu-dropin's devhostcall.cpp serves the ROCr backend only: the PAL backend makes one doorbell signal per device through PAL (not HSA signals) and needs ROCclr's own devhostcall.cpp"
#endif

#include "top.hpp"
#include "utils/debug.hpp"
#include "thread/monitor.hpp"
#include "thread/thread.hpp"
#include "platform/context.hpp"
#include "platform/memory.hpp"
#include "device/device.hpp"
#include "device/devhostcall.hpp"

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <type_traits>
#include <utility>

// SANITIZER goes to ROCclr's handleSanitizerService under ROCclr's own
// condition (a clang build with AddressSanitizer). The stand-in tests define
// AMDGPU_DROPIN_ROCCLR_TEST_ASAN_ROUTE to take this path with a compiler that
// is not clang; a ROCclr build never defines it.
#if defined(AMDGPU_DROPIN_ROCCLR_TEST_ASAN_ROUTE)
#define AMDGPU_DROPIN_ROCCLR_SANITIZER 1
#elif defined(__clang__)
#if __has_feature(address_sanitizer)
#define AMDGPU_DROPIN_ROCCLR_SANITIZER 1
#endif
#endif

#if defined(AMDGPU_DROPIN_ROCCLR_SANITIZER)
// Defines handleSanitizerService (ROCclr defines it in this header, for the
// file that replaces its devhostcall.cpp to include).
#include "device/devsanitizer.hpp"
#endif

// RPC buffers: a tree with device/devrpc.hpp (rocm-systems projects/clr,
// the branch of PR #4720) declares enableRpc / flushRpc / disableRpc in
// devhostcall.hpp and defined them in its devhostcall.cpp; this file then
// defines them (checked below against the tree's declarations).
#if defined(__has_include)
#if __has_include("device/devrpc.hpp")
#define AMDGPU_DROPIN_ROCCLR_RPC 1
#include "device/devhcmessages.hpp"
#include "device/devrpc.hpp"
#endif
#endif

#include "amdgpu_dropin_hostcall.h"

namespace amd {

// Defined by ROCclr (platform/runtime.cpp).
extern amd::Monitor listenerLock;

// ROCclr's own class on trees that have it (thread/thread.hpp, up to the
// 2025 trees); elsewhere this declares an incomplete class, which the probe
// below sees.
class HostThread;

namespace {

#if defined(USE_NEW_HOSTCALL_IMPL)
constexpr uint32_t kProtocol = AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT;
#else
constexpr uint32_t kProtocol = AMDGPU_DROPIN_HOSTCALL_PROTOCOL_CLASSIC;
#endif

// ROCclr's log masks for hostcall setup messages.
constexpr auto kSetupMask = amd::LOG_INIT | amd::LOG_QUEUE | amd::LOG_RESOURCE;

// A device allocation of exactly this size gets this alignment where the
// tree's amd::Buffer takes an alignment (large-page backing of the device
// heap's slabs).
constexpr size_t kLargePage = 2 * 1024 * 1024;

// ---- What this ROCclr tree offers, detected at compile time -------------
// No ROCclr version macro exists; the trees differ in members. Each probe
// is a template so a missing member only removes a candidate.

template <typename D, typename = void>
struct HasHostcallTracking : std::false_type {};
template <typename D>
struct HasHostcallTracking<
    D, std::void_t<decltype(std::declval<D&>().TrackHostcallMemory(std::declval<amd::Memory*>())),
                   decltype(std::declval<D&>().RemoveHostcallMemory(std::declval<amd::Memory*>()))>>
    : std::true_type {};

template <typename B, typename = void>
struct BufferTakesAlignment : std::false_type {};
template <typename B>
struct BufferTakesAlignment<
    B, std::void_t<decltype(new (std::declval<amd::Context&>())
                                B(std::declval<amd::Context&>(), amd::Memory::Flags{}, size_t{},
                                  static_cast<void*>(nullptr), size_t{}))>> : std::true_type {};

template <typename D>
void trackHostcallMemory(D& dev, amd::Memory* mem) {
  if constexpr (HasHostcallTracking<D>::value) {
    dev.TrackHostcallMemory(mem);
  } else {
    (void)dev;
    (void)mem;
  }
}

template <typename D>
void untrackHostcallMemory(D& dev, amd::Memory* mem) {
  if constexpr (HasHostcallTracking<D>::value) {
    dev.RemoveHostcallMemory(mem);
  } else {
    (void)dev;
    (void)mem;
  }
}

template <typename B>
B* newDeviceBuffer(amd::Context& ctx, size_t size) {
  if constexpr (BufferTakesAlignment<B>::value) {
    return new (ctx) B(ctx, CL_MEM_READ_WRITE, size, nullptr, size == kLargePage ? kLargePage : 0);
  } else {
    return new (ctx) B(ctx, CL_MEM_READ_WRITE, size);
  }
}

// ---- Threads that ROCclr's locks accept ------------------------------------
// Trees with amd::HostThread have the legacy amd::Monitor (DEBUG_CLR_USE_
// STDMUTEX_IN_AMD_MONITOR off by default): its lock asserts that
// amd::Thread::current() is not null, the contended path uses that thread's
// semaphore, and recursion compares it with the owner. HIP makes every API
// thread an amd::HostThread; ROCclr's HSA signal-handler thread makes itself
// one. Trees without HostThread (2026) lock std::mutexes: any thread will do.

template <typename T, typename = void>
struct IsComplete : std::false_type {};
template <typename T>
struct IsComplete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

// Binds a new amd::HostThread to the calling thread when the tree needs one
// and the thread has none. Returns what it made (null: nothing made); after
// it, callingThreadAccepted() says whether the thread may take ROCclr locks.
template <typename H = amd::HostThread>
amd::Thread* adoptCallingThread() noexcept {
  if constexpr (IsComplete<H>::value) {
    if (amd::Thread::current() != nullptr) {
      return nullptr;
    }
#if defined(__cpp_exceptions)
    try {
#endif
      // The constructor makes it current(), as in ROCclr's signal handler.
      H* made = new H();
      if (made != nullptr && amd::Thread::current() != made) {
        delete made;
        made = nullptr;
      }
      return made;
#if defined(__cpp_exceptions)
    } catch (...) {
      return nullptr;
    }
#endif
  } else {
    return nullptr;
  }
}

bool callingThreadAccepted() {
  return !IsComplete<amd::HostThread>::value || amd::Thread::current() != nullptr;
}

// Undoes adoptCallingThread: the thread is no amd::Thread again.
void unbindCallingThread(amd::Thread* made) {
  if (made == nullptr) {
    return;
  }
  if (amd::Thread::current() == made) {
    amd::details::thread_ = nullptr;
  }
  delete made;
}

// The registration of a library thread (main listener or helper), kept for
// the thread's life and deleted when it ends, so listener threads that stop
// and start again leave nothing behind.
struct LibraryThreadRegistration {
  amd::Thread* made = nullptr;
  ~LibraryThreadRegistration() { unbindCallingThread(made); }
};

// Before a service on a library thread takes a ROCclr lock. False: the
// thread cannot be made one ROCclr accepts (out of memory); take no lock.
bool enterLibraryThread() {
  thread_local LibraryThreadRegistration registration;
  if (registration.made == nullptr) {
    registration.made = adoptCallingThread();
  }
  return callingThreadAccepted();
}

// For an entry from a thread that is not the library's (enable, disable,
// fork): ROCclr's callers are amd::Threads already; any other thread is one
// for the call only.
class ScopedAcceptedThread {
 public:
  ScopedAcceptedThread() : made_(adoptCallingThread()) {}
  ~ScopedAcceptedThread() { unbindCallingThread(made_); }
  ScopedAcceptedThread(const ScopedAcceptedThread&) = delete;
  ScopedAcceptedThread& operator=(const ScopedAcceptedThread&) = delete;
  bool accepted() const { return callingThreadAccepted(); }

 private:
  amd::Thread* made_;
};

// A service's failure log, which must not throw into the library.
void logServiceFailure(const char* what) noexcept {
#if defined(__cpp_exceptions)
  try {
#endif
    ClPrint(amd::LOG_ERROR, amd::LOG_ALWAYS, "Hostcall: %s", what);
#if defined(__cpp_exceptions)
  } catch (...) {
  }
#endif
}

#if defined(AMDGPU_DROPIN_ROCCLR_SANITIZER)
constexpr bool kRoutesSanitizer = true;
#else
constexpr bool kRoutesSanitizer = false;
#endif

// ---- Buffers enabled through this file (under listenerLock) -------------

struct Enabled {
  const amd::Device* device;
  amd::Memory* occupied;  // the phase-bit bitmap; released at disable
};

// Leaked on purpose: ROCclr's devices disable their buffers from static
// destructors at exit, which may run after this file's would.
std::map<void*, Enabled>& enabledBuffers() {
  static auto* buffers = new std::map<void*, Enabled>();
  return *buffers;
}

#if defined(AMDGPU_DROPIN_ROCCLR_SANITIZER)
// One URI locator while any buffer is enabled, from the first device, as
// ROCclr's listener kept one.
device::UriLocator* uriLocator = nullptr;
#endif

// ---- DEVMEM (service 3), one lane: slot[0] address, slot[1] size --------

void devmemFree(amd::Device& dev, uint64_t address) {
  void* key = reinterpret_cast<void*>(static_cast<uintptr_t>(address));
  size_t offset = 0;
  amd::Memory* mem = amd::MemObjMap::FindMemObj(key, &offset);
  if (mem == nullptr) {
    ClPrint(amd::LOG_ERROR, amd::LOG_ALWAYS, "Hostcall: Unknown pointer %p in devmem service", key);
    return;
  }
  if (offset != 0) {
    ClPrint(amd::LOG_ERROR, amd::LOG_ALWAYS,
            "Hostcall: pointer %p in devmem service is inside a block, not its start; not freed",
            key);
    return;
  }
  untrackHostcallMemory(dev, mem);
  amd::MemObjMap::RemoveMemObj(key);
  mem->release();
}

// Undoes a half-made allocation when it is left early (a failure or an
// exception): out of MemObjMap if it got in, then released.
struct PendingBlock {
  amd::Memory* mem;
  void* key = nullptr;
  ~PendingBlock() {
    if (mem == nullptr) {
      return;
    }
    if (key != nullptr) {
      amd::MemObjMap::RemoveMemObj(key);
    }
    mem->release();
  }
};

uint64_t devmemAllocate(amd::Device& dev, uint64_t size) {
  amd::Context& ctx = dev.context();
  // ROCclr's operator new throws on failure; null is checked as ROCclr does.
  amd::Buffer* buf = newDeviceBuffer<amd::Buffer>(ctx, static_cast<size_t>(size));
  if (buf == nullptr) {
    return 0;
  }
  PendingBlock pending{buf};
  uint64_t va = 0;
  if (buf->create()) {
    device::Memory* dm = buf->getDeviceMemory(dev);
    if (dm != nullptr) {
      va = dm->virtualAddress();
    }
  }
  if (va == 0) {
    return 0;
  }
  void* key = reinterpret_cast<void*>(static_cast<uintptr_t>(va));
  amd::MemObjMap::AddMemObj(key, buf);
  pending.key = key;
  trackHostcallMemory(dev, buf);
  pending.mem = nullptr;
  return va;
}

int32_t serveDevmemLane(void* user_data, void* buffer, uint32_t service, uint32_t lane,
                                   uint64_t* slot) {
  (void)buffer;
  (void)service;
  (void)lane;
  auto& dev = *static_cast<amd::Device*>(user_data);
#if defined(__cpp_exceptions)
  try {
#endif
    if (!enterLibraryThread()) {
      logServiceFailure("DEVMEM request not served: the listener thread is no amd::Thread");
      slot[0] = 0;
      return 0;
    }
    amd::ScopedLock lock(listenerLock);
    if (slot[0] == 0 && slot[1] == 0) {
      LogPrintfError("Hostcall: %s", "DEVMEM request with address and size both 0; answered 0");
      return 0;
    }
    if (slot[0] != 0) {
      devmemFree(dev, slot[0]);
    } else {
      slot[0] = devmemAllocate(dev, slot[1]);
    }
    return 0;
#if defined(__cpp_exceptions)
  } catch (...) {
    // Never unwind into the library, and answer 0, "no memory": an error
    // value would reach the device heap as a block's address.
    logServiceFailure("DEVMEM request failed (exception); answered 0");
    slot[0] = 0;
    return 0;
  }
#endif
}

#if defined(AMDGPU_DROPIN_ROCCLR_SANITIZER)
static_assert(sizeof(amd::Payload) == sizeof(amdgpu_dropin_hostcall_packet_t::slots),
              "ROCclr's Payload is the packet's 64 x 8 words");

// SANITIZER (service 4), the whole packet at once, as ROCclr hands it over.
int32_t serveSanitizerPacket(void* user_data, amdgpu_dropin_hostcall_packet_t* packet) {
  const auto* dev = static_cast<const amd::Device*>(user_data);
#if defined(__cpp_exceptions)
  try {
#endif
    if (!enterLibraryThread()) {
      logServiceFailure("SANITIZER report not served: the listener thread is no amd::Thread");
      return 1;
    }
    amd::ScopedLock lock(listenerLock);
    amd::Payload payload;
    std::memcpy(&payload, packet->slots, sizeof(payload));
    handleSanitizerService(&payload, packet->activemask, dev, uriLocator);
    std::memcpy(packet->slots, &payload, sizeof(payload));
    return 0;
#if defined(__cpp_exceptions)
  } catch (...) {
    logServiceFailure("SANITIZER report failed (exception)");
    return 1;
  }
#endif
}
#endif

const char* statusText(amdgpu_dropin_hostcall_status_t status) {
  return amdgpu_dropin_hostcall_status_string(status);
}

// ---- PRINTF (service 2) through the C stream ROCclr printed to ---------
// ROCclr formats into stdout (stderr for bit 0 of the control word) with
// vfprintf. The library hands each whole message to this sink: written
// under the stream's lock, so no other thread's stdio output splits it, and
// flushed, so it lands after the host's earlier output still in the
// stream's buffer and is not lost at _exit. No ROCclr lock is taken.
size_t printToStdio(void* user_data, void* buffer, uint32_t stream, const char* bytes, size_t length) {
  (void)user_data;
  (void)buffer;
  FILE* out = stream == AMDGPU_DROPIN_HOSTCALL_PRINTF_STDERR ? stderr : stdout;
  flockfile(out);
  size_t written = std::fwrite(bytes, 1, length, out);
  bool flushed = std::fflush(out) == 0;
  funlockfile(out);
  return flushed ? written : 0;
}

// fork: the child must not inherit listenerLock held by another thread
// (the listener inside a DEVMEM service), and inherits no enabled buffer
// (the library's listener state stays with the parent). The forking thread
// may be no amd::Thread: it is one from prepare to the parent's and the
// child's handler.
thread_local amd::Thread* forkAdopted = nullptr;
thread_local bool forkLocked = false;

void beforeFork() {
  forkAdopted = adoptCallingThread();
  forkLocked = callingThreadAccepted();
  if (forkLocked) {
    listenerLock.lock();
  }
}

void leaveFork() {
  if (forkLocked) {
    listenerLock.unlock();
    forkLocked = false;
  }
  unbindCallingThread(forkAdopted);
  forkAdopted = nullptr;
}

void afterForkInParent() { leaveFork(); }

#if defined(AMDGPU_DROPIN_ROCCLR_RPC)
void forgetRpcBuffersInChild();
#endif

void afterForkInChild() {
  // The parent's records name buffers this process has not enabled; their
  // objects stay the parent's (leaked here, never released twice). The
  // child has one thread: this holds even where prepare could not lock.
  auto* parents = new std::map<void*, Enabled>();
  parents->swap(enabledBuffers());
#if defined(AMDGPU_DROPIN_ROCCLR_SANITIZER)
  uriLocator = nullptr;
#endif
#if defined(AMDGPU_DROPIN_ROCCLR_RPC)
  forgetRpcBuffersInChild();
#endif
  leaveFork();
}

void installForkHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pthread_atfork(beforeFork, afterForkInParent, afterForkInChild) != 0) {
      ClPrint(amd::LOG_WARNING, kSetupMask, "Hostcall: %s",
              "fork handlers could not be installed; a child forked during a DEVMEM service may "
              "block in enableHostcalls");
    }
  });
}

void unregisterServices(void* buffer, bool devmem, bool sanitizer, bool printfSink) {
  if (printfSink) {
    amdgpu_dropin_hostcall_unregister_printf_sink(buffer);
  }
  if (devmem) {
    amdgpu_dropin_hostcall_unregister_handler(AMDGPU_DROPIN_HOSTCALL_SERVICE_DEVMEM, buffer);
  }
  if (sanitizer) {
    amdgpu_dropin_hostcall_unregister_handler(AMDGPU_DROPIN_HOSTCALL_SERVICE_SANITIZER, buffer);
  }
}

// Forgets `buffer` (under listenerLock); returns its record (a null device
// when another disable forgot it first).
Enabled forget(void* buffer) {
  amd::ScopedLock lock(listenerLock);
  auto& buffers = enabledBuffers();
  auto it = buffers.find(buffer);
  if (it == buffers.end()) {
    return Enabled{nullptr, nullptr};
  }
  Enabled record = it->second;
  buffers.erase(it);
#if defined(AMDGPU_DROPIN_ROCCLR_SANITIZER)
  if (buffers.empty()) {
    delete uriLocator;
    uriLocator = nullptr;
  }
#endif
  return record;
}

bool enable(const amd::Device& dev, void* buffer, uint32_t numPackets, amd::Memory* occupied,
            uint32_t* bitmap) {
  // A null buffer would make the services below process-wide ones.
  if (buffer == nullptr) {
    ClPrint(amd::LOG_ERROR, kSetupMask, "Failed to register hostcall buffer: %s", "null buffer");
    return false;
  }
  installForkHandlers();
  {
    amd::ScopedLock lock(listenerLock);
    auto& buffers = enabledBuffers();
    if (buffers.count(buffer) != 0) {
      ClPrint(amd::LOG_ERROR, kSetupMask, "Hostcall buffer %p is already registered", buffer);
      return false;
    }
#if defined(AMDGPU_DROPIN_ROCCLR_SANITIZER)
    if (buffers.empty()) {
      uriLocator = dev.createUriLocator();
    }
#endif
    buffers.emplace(buffer, Enabled{&dev, occupied});
  }
  // The services first, so no request of this buffer meets the defaults.
  // Only what this call registered is undone on failure (a handler someone
  // else registered for this buffer stays theirs).
  void* user = const_cast<amd::Device*>(&dev);
  amdgpu_dropin_hostcall_status_t status = amdgpu_dropin_hostcall_register_lane_handler(
      AMDGPU_DROPIN_HOSTCALL_SERVICE_DEVMEM, buffer, serveDevmemLane, user);
  bool devmemRegistered = status == AMDGPU_DROPIN_HOSTCALL_OK;
  bool sanitizerRegistered = false;
  bool printfRegistered = false;
  if (status == AMDGPU_DROPIN_HOSTCALL_OK) {
    status = amdgpu_dropin_hostcall_register_printf_sink(buffer, printToStdio, nullptr);
    printfRegistered = status == AMDGPU_DROPIN_HOSTCALL_OK;
  }
#if defined(AMDGPU_DROPIN_ROCCLR_SANITIZER)
  if (status == AMDGPU_DROPIN_HOSTCALL_OK) {
    status = amdgpu_dropin_hostcall_register_packet_handler(AMDGPU_DROPIN_HOSTCALL_SERVICE_SANITIZER,
                                                            buffer, serveSanitizerPacket, user);
    sanitizerRegistered = status == AMDGPU_DROPIN_HOSTCALL_OK;
  }
#endif
  if (status == AMDGPU_DROPIN_HOSTCALL_OK) {
    status = amdgpu_dropin_hostcall_enable(buffer, numPackets, nullptr, kProtocol, bitmap);
  }
  if (status != AMDGPU_DROPIN_HOSTCALL_OK) {
    ClPrint(amd::LOG_ERROR, kSetupMask, "Failed to register hostcall buffer %p: %s", buffer,
            statusText(status));
    unregisterServices(buffer, devmemRegistered, sanitizerRegistered, printfRegistered);
    forget(buffer);
    return false;
  }
  ClPrint(amd::LOG_INFO, amd::LOG_QUEUE, "Registered hostcall buffer %p (device %p)", buffer,
          static_cast<const void*>(&dev));
  return true;
}

}  // namespace

size_t getHostcallBufferSize(uint32_t num_packets) {
  return amdgpu_dropin_hostcall_buffer_size(kProtocol, num_packets);
}

uint32_t getHostcallBufferAlignment() { return amdgpu_dropin_hostcall_buffer_alignment(kProtocol); }

namespace {
bool rejectUnacceptedThread(void* buffer) {
  ClPrint(amd::LOG_ERROR, kSetupMask, "Failed to register hostcall buffer %p: %s", buffer,
          "the calling thread cannot be made an amd::Thread");
  return false;
}
}  // namespace

#if defined(USE_NEW_HOSTCALL_IMPL)
bool enableHostcalls(const amd::Device& dev, void* buffer, uint32_t numPackets,
                     amd::Memory* occupiedMem) {
  ScopedAcceptedThread thread;
  if (!thread.accepted()) {
    return rejectUnacceptedThread(buffer);
  }
  // As ROCclr: no bitmap, or one without a device address, is a failure.
  device::Memory* dm = occupiedMem != nullptr ? occupiedMem->getDeviceMemory(dev) : nullptr;
  uint64_t va = dm != nullptr ? dm->virtualAddress() : 0;
  if (va == 0) {
    ClPrint(amd::LOG_ERROR, kSetupMask, "Failed to initialize hostcall buffer %p: %s", buffer,
            "no occupancy bitmap in device memory");
    return false;
  }
  if (occupiedMem->getSize() < amdgpu_dropin_hostcall_occupancy_size(numPackets)) {
    ClPrint(amd::LOG_ERROR, kSetupMask,
            "Failed to initialize hostcall buffer %p: occupancy bitmap of %zu bytes, %zu needed",
            buffer, occupiedMem->getSize(), amdgpu_dropin_hostcall_occupancy_size(numPackets));
    return false;
  }
  // The library never reads or writes the bitmap: it hands its device
  // address to device code through the buffer.
  auto* bitmap = reinterpret_cast<uint32_t*>(static_cast<uintptr_t>(va));
  return enable(dev, buffer, numPackets, occupiedMem, bitmap);
}
#else
bool enableHostcalls(const amd::Device& dev, void* buffer, uint32_t numPackets) {
  ScopedAcceptedThread thread;
  if (!thread.accepted()) {
    return rejectUnacceptedThread(buffer);
  }
  return enable(dev, buffer, numPackets, nullptr, nullptr);
}
#endif

void disableHostcalls(void* buffer) {
  ScopedAcceptedThread thread;
  if (!thread.accepted()) {
    // No ROCclr lock can be taken: the library's disable still makes the
    // buffer safe to free; this file's record and the bitmap are kept.
    ClPrint(amd::LOG_ERROR, kSetupMask, "Unregistering hostcall buffer %p: %s", buffer,
            "the calling thread cannot be made an amd::Thread; its record is kept");
    amdgpu_dropin_hostcall_disable(buffer, nullptr);
    return;
  }
  {
    amd::ScopedLock lock(listenerLock);
    if (enabledBuffers().count(buffer) == 0) {
      ClPrint(amd::LOG_ERROR, kSetupMask, "Hostcall buffer %p is not registered", buffer);
      return;
    }
  }
  // Without listenerLock: this waits for a service of the buffer that is
  // running now, and services take that lock. The buffer's handlers go with
  // it; the last disable stops the listener.
  amdgpu_dropin_hostcall_status_t status = amdgpu_dropin_hostcall_disable(buffer, nullptr);
  if (status != AMDGPU_DROPIN_HOSTCALL_OK) {
    // Not enabled in the library (it was shut down, e.g. at exit): its
    // handlers may still be registered.
    ClPrint(amd::LOG_ERROR, kSetupMask, "Failed to unregister hostcall buffer %p: %s", buffer,
            statusText(status));
    unregisterServices(buffer, true, kRoutesSanitizer, true);
  }
  Enabled record = forget(buffer);
  if (record.occupied != nullptr) {
    record.occupied->release();
  }
  ClPrint(amd::LOG_INFO, amd::LOG_QUEUE, "Unregistered hostcall buffer %p", buffer);
}

#if defined(AMDGPU_DROPIN_ROCCLR_RPC)
// ---- RPC buffers (trees with device/devrpc.hpp) -------------------------
// The library's listener polls each enabled RPC buffer through a registered
// poll callback, which serves it with ROCclr's own devrpc.cpp
// (processRpcBuffer; flushRpcBuffer where the tree's processRpcBuffer
// serves one request and says nothing), under listenerLock as ROCclr's
// listener did: the MessageHandler and the DEVMEM path behind it have no lock
// of their own. The device rings the library's doorbell, whose handle
// initRpcDoorbell writes into the buffer; the listener sleeps on it while
// idle. disableRpc waits for a poll in progress.

}  // namespace amd

// Does the tree's devhostcall.hpp declare the three functions as defined
// below? Unqualified lookup sees amd's declarations and these fallbacks side
// by side (both namespaces are nominated into the global scope); a declared
// function is the better match.
namespace amdgpu_dropin_rocclr_rpc_fallback {
struct Missing {};
template <typename... A>
Missing enableRpc(A&&...);
template <typename... A>
Missing flushRpc(A&&...);
template <typename... A>
Missing disableRpc(A&&...);
}  // namespace amdgpu_dropin_rocclr_rpc_fallback

namespace amdgpu_dropin_rocclr_rpc_probe {
using namespace amd;
using namespace amdgpu_dropin_rocclr_rpc_fallback;
constexpr bool kDeclared =
    std::is_same<decltype(enableRpc(std::declval<const amd::Device&>(), static_cast<void*>(nullptr),
                                    uint32_t{0})),
                 bool>::value &&
    std::is_same<decltype(flushRpc(static_cast<void*>(nullptr))), void>::value &&
    std::is_same<decltype(disableRpc(static_cast<void*>(nullptr))), void>::value;
}  // namespace amdgpu_dropin_rocclr_rpc_probe

static_assert(amdgpu_dropin_rocclr_rpc_probe::kDeclared,
              "this tree has device/devrpc.hpp, but its device/devhostcall.hpp does not declare "
              "bool enableRpc(const Device&, void*, uint32_t), void flushRpc(void*) and "
              "void disableRpc(void*): amdgpu-dropin's devhostcall.cpp does not know this tree");

namespace amd {
namespace {

// Where processRpcBuffer reports whether it served (a7c0a52f), the poll
// returns that and the listener polls again while there is work; where it
// returns nothing and serves one request (22d8a787), the poll drains the
// buffer with flushRpcBuffer instead.
template <typename Info>
int32_t serveRpcBuffer(Info* info) {
  if constexpr (std::is_same<decltype(processRpcBuffer(info)), bool>::value) {
    return processRpcBuffer(info) ? 1 : 0;
  } else {
    flushRpcBuffer(info);
    return 0;
  }
}

// RPC buffers this file enabled (under listenerLock). Leaked on purpose, as
// enabledBuffers.
std::map<void*, RpcBufferInfo*>& rpcBuffers() {
  static auto* buffers = new std::map<void*, RpcBufferInfo*>();
  return *buffers;
}

// One printf message assembler for every RPC buffer, as ROCclr's listener
// kept one (used under listenerLock only; leaked, as the buffers' records).
MessageHandler& rpcMessages() {
  static auto* messages = new MessageHandler();
  return *messages;
}

RpcBufferInfo* findRpc(void* buffer) {
  auto& buffers = rpcBuffers();
  auto it = buffers.find(buffer);
  return it == buffers.end() ? nullptr : it->second;
}

// The poll callback: on a listener thread, whenever the listener scans.
int32_t pollRpcBuffer(void* user_data, void* key) {
  (void)key;
  auto* info = static_cast<RpcBufferInfo*>(user_data);
#if defined(__cpp_exceptions)
  try {
#endif
    if (!enterLibraryThread()) {
      logServiceFailure("RPC buffer not served: the listener thread is no amd::Thread");
      return -1;
    }
    amd::ScopedLock lock(listenerLock);
    return serveRpcBuffer(info);
#if defined(__cpp_exceptions)
  } catch (...) {
    logServiceFailure("RPC: serving a buffer failed (exception)");
    return -1;
  }
#endif
}

void forgetRpcBuffersInChild() {
  // The parent's registrations are not the child's (the library's polls
  // stay with the parent); their records are leaked, never freed twice.
  auto* parents = new std::map<void*, RpcBufferInfo*>();
  parents->swap(rpcBuffers());
}

}  // namespace

bool enableRpc(const amd::Device& dev, void* buffer, uint32_t num_ports) {
  if (buffer == nullptr || num_ports == 0 || num_ports > kMaxRpcPortCount) {
    ClPrint(amd::LOG_ERROR, kSetupMask, "Failed to register RPC buffer %p: %u ports", buffer, num_ports);
    return false;
  }
  ScopedAcceptedThread thread;
  if (!thread.accepted()) {
    ClPrint(amd::LOG_ERROR, kSetupMask, "Failed to register RPC buffer %p: %s", buffer,
            "the calling thread cannot be made an amd::Thread");
    return false;
  }
  installForkHandlers();
  RpcBufferInfo* info = nullptr;
#if defined(__cpp_exceptions)
  try {
#endif
    info = new RpcBufferInfo{buffer, dev.info().wavefrontWidth_, num_ports, &dev};
#if defined(__cpp_exceptions)
  } catch (...) {
    ClPrint(amd::LOG_ERROR, kSetupMask, "Failed to register RPC buffer %p: %s", buffer, "out of memory");
    return false;
  }
#endif
  info->messages = &rpcMessages();
  {
    amd::ScopedLock lock(listenerLock);
    if (findRpc(buffer) != nullptr) {
      ClPrint(amd::LOG_ERROR, kSetupMask, "RPC buffer %p is already registered", buffer);
      delete info;
      return false;
    }
    rpcBuffers()[buffer] = info;
  }
  uint64_t doorbell = 0;
  amdgpu_dropin_hostcall_status_t status =
      amdgpu_dropin_hostcall_register_poll(buffer, pollRpcBuffer, info, &doorbell);
  if (status != AMDGPU_DROPIN_HOSTCALL_OK) {
    ClPrint(amd::LOG_ERROR, kSetupMask, "Failed to register RPC buffer %p: %s", buffer, statusText(status));
    {
      amd::ScopedLock lock(listenerLock);
      rpcBuffers().erase(buffer);
    }
    delete info;
    return false;
  }
  // The device rings the listener's doorbell; polls before this line find
  // nothing the device could have posted.
  initRpcDoorbell(buffer, reinterpret_cast<void*>(static_cast<uintptr_t>(doorbell)));
  ClPrint(amd::LOG_INFO, amd::LOG_QUEUE, "Registered RPC buffer %p (device %p)", buffer,
          static_cast<const void*>(&dev));
  return true;
}

void flushRpc(void* buffer) {
  ScopedAcceptedThread thread;
  if (!thread.accepted()) {
    ClPrint(amd::LOG_ERROR, kSetupMask, "RPC buffer %p not flushed: %s", buffer,
            "the calling thread cannot be made an amd::Thread");
    return;
  }
  amd::ScopedLock lock(listenerLock);
  RpcBufferInfo* info = findRpc(buffer);
  if (info == nullptr) {
    ClPrint(amd::LOG_ERROR, kSetupMask, "RPC buffer %p is not registered", buffer);
    return;
  }
  // On the caller's thread, as ROCclr's flushRpc: what is posted now is
  // served when this returns.
  flushRpcBuffer(info);
}

void disableRpc(void* buffer) {
  ScopedAcceptedThread thread;
  if (!thread.accepted()) {
    ClPrint(amd::LOG_ERROR, kSetupMask, "RPC buffer %p not unregistered: %s", buffer,
            "the calling thread cannot be made an amd::Thread");
    return;
  }
  {
    amd::ScopedLock lock(listenerLock);
    if (findRpc(buffer) == nullptr) {
      ClPrint(amd::LOG_ERROR, kSetupMask, "RPC buffer %p is not registered", buffer);
      return;
    }
  }
  // Without listenerLock: this waits for a poll in progress, which holds it.
  amdgpu_dropin_hostcall_status_t status = amdgpu_dropin_hostcall_unregister_poll(buffer);
  if (status != AMDGPU_DROPIN_HOSTCALL_OK) {
    // Not registered in the library (it was shut down, e.g. at exit): no
    // poll runs any more either.
    ClPrint(amd::LOG_ERROR, kSetupMask, "Failed to unregister RPC buffer %p: %s", buffer,
            statusText(status));
  }
  RpcBufferInfo* info = nullptr;
  {
    amd::ScopedLock lock(listenerLock);
    info = findRpc(buffer);
    rpcBuffers().erase(buffer);
  }
  delete info;
  ClPrint(amd::LOG_INFO, amd::LOG_QUEUE, "Unregistered RPC buffer %p", buffer);
}
#endif  // AMDGPU_DROPIN_ROCCLR_RPC

}  // namespace amd

// Stand-in for the ROCclr classes and functions that amdgpu-dropin's
// integrations/rocclr/devhostcall.cpp uses, written from the facts of
// ROCclr's declarations (names, signatures, ownership, which threads may
// lock what, what throws), not from its code. docs/rocclr.md ("The
// stand-in ROCclr") lists the facts per tree. The files beside this one sit
// at ROCclr's include paths (top.hpp, thread/thread.hpp, device/device.hpp,
// ...) and include this one.
//
// Two trees: by default ROCm/clr of 2024 (f9f995c6); STANDIN_ROCCLR_2026
// gives rocm-systems projects/clr of 2026. They differ in:
//   * locks: 2024's amd::Monitor is the legacy monitor, which only an
//     amd::Thread may lock (HIP threads, ROCclr's own threads and any thread
//     made an amd::HostThread); its only constructor is Monitor(bool
//     recursive), so listenerLock("...") and MemObjMap's lock are recursive.
//     2026's amd::Monitor is a std::mutex any thread may lock, with only a
//     default constructor, and has no HostThread;
//   * hostcall-memory tracking (2026): an unguarded std::vector in Device;
//   * Buffer's alignment argument and FindMemObj's device argument (2026);
//   * the 4-argument enableHostcalls (2026 with USE_NEW_HOSTCALL_IMPL).
//
// Stricter than ROCclr, never kinder: every contract breach the stand-in can
// see is counted in standin::violations() and printed; tests require 0. A
// breach that ROCclr answers by crashing, hanging or asserting (a lock from
// a thread the monitor does not accept, a non-recursive monitor locked again
// by its holder, a null device memory in ~Device) aborts here too. Memory
// objects and amd::Thread objects are counted alive until deleted.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

typedef unsigned int uint;
typedef uint64_t cl_mem_flags;
#define CL_MEM_READ_WRITE (static_cast<cl_mem_flags>(1) << 0)

#if defined(AMDGPU_DROPIN_ROCCLR_TEST_ASAN_ROUTE)
#define STANDIN_ROCCLR_ASAN 1
#elif defined(__clang__)
#if __has_feature(address_sanitizer)
#define STANDIN_ROCCLR_ASAN 1
#endif
#endif

namespace amd {

constexpr size_t Ki = 1024;
constexpr size_t Mi = Ki * Ki;

// ROCclr's values (utils/debug.hpp).
enum LogLevel { LOG_NONE = 0, LOG_ERROR = 1, LOG_WARNING = 2, LOG_INFO = 3, LOG_DEBUG = 4 };
enum LogMask {
  LOG_QUEUE = 16,
  LOG_RESOURCE = 1024,
  LOG_INIT = 2048,
  LOG_MEM = 131072,
  LOG_ALWAYS = -1
};

class Context;
class Device;
class Memory;
class Thread;

namespace standin {

struct LogEntry {
  int level;
  int mask;
  std::string text;
};
void log_print(int level, int mask, const char* format, ...) __attribute__((format(printf, 3, 4)));
std::vector<LogEntry> log_entries();
void log_clear();
// Entries whose text contains `needle`.
size_t log_count(const char* needle);

// A contract breach: printed, counted.
void violation(const char* format, ...) __attribute__((format(printf, 1, 2)));
// A breach ROCclr answers with a crash, a hang or an assert: printed, then abort().
[[noreturn]] void fatal(const char* format, ...) __attribute__((format(printf, 1, 2)));
long violations();

// amd::Memory objects alive (constructed, not yet deleted by their last release).
long live_memory();
// amd::Thread objects alive (constructed, not yet deleted).
long live_threads();
// The next `count` Memory::create() calls fail.
void fail_next_creates(int count);
// The next `count` Memory operator new calls throw std::bad_alloc.
void fail_next_news(int count);
// The next `count` MemObjMap::AddMemObj calls throw std::bad_alloc (before inserting).
void fail_next_map_inserts(int count);
// The next `count` Device::TrackHostcallMemory calls throw std::bad_alloc (2026).
void fail_next_tracks(int count);
// Memory::create() of an object in `context` takes `delay_us` (0: none).
void set_create_delay(const Context* context, uint32_t delay_us);
// What getDeviceMemory() gives for a created object.
enum class DeviceMemoryMode { kNormal, kNull, kZeroAddress };
void set_device_memory_mode(DeviceMemoryMode mode);
// The alignment a live object at device address `va` was created with
// (-1 if none is alive there).
long alignment_of(uint64_t va);
// The context a live object at device address `va` belongs to (or null).
const Context* context_of(uint64_t va);
// Distinct threads that have run Memory::create().
size_t creating_threads();

// handleSanitizerService calls seen.
struct SanitizerCall {
  uint64_t activemask;
  const Device* device;
  const void* uri_locator;
  uint64_t first_slot[8];
};
std::vector<SanitizerCall> sanitizer_calls();

// True when the calling thread holds amd::listenerLock.
bool listener_lock_held();

// Makes the calling thread one that ROCclr's locks accept, as HIP's API
// entry does for application threads (2024: an amd::HostThread, leaked as
// HIP leaks it; 2026: nothing to do).
void enter_as_rocclr_thread();
// Undoes enter_as_rocclr_thread on the calling thread (deletes its amd::Thread).
void leave_as_rocclr_thread();
// Forgets which threads have run Memory::create().
void reset_creating_threads();

}  // namespace standin

// ---- Threads (thread/thread.hpp) -------------------------------------------

class Thread {
 public:
  // The amd::Thread bound to the calling thread (null for none).
  static inline Thread* current();
  virtual ~Thread();
  const std::string& name() const { return name_; }
  virtual bool isHostThread() const { return false; }
  Thread(const Thread&) = delete;
  Thread& operator=(const Thread&) = delete;

 protected:
  // The stand-in binds to the calling thread only (spawn = false); it
  // starts no thread of its own.
  explicit Thread(const std::string& name, size_t stackSize = 0, bool spawn = true);
  void setCurrent();

 private:
  virtual void run(void* data) = 0;
  const std::string name_;
};

#if !defined(STANDIN_ROCCLR_2026)
class HostThread : public Thread {
 public:
  // Binds a new amd::Thread to the calling thread (it becomes current()).
  HostThread();
  bool isHostThread() const override { return true; }

 private:
  void run(void* data) override;
};
#endif

namespace details {
extern __thread Thread* thread_ __attribute__((tls_model("initial-exec")));
static inline Thread* currentThread() { return thread_; }
}  // namespace details

inline Thread* Thread::current() { return details::currentThread(); }

// ---- Locks (thread/monitor.hpp) ----------------------------------------------

#if !defined(STANDIN_ROCCLR_2026)
// The legacy monitor (the default: DEBUG_CLR_USE_STDMUTEX_IN_AMD_MONITOR is
// false): only an amd::Thread may lock it (a debug ROCclr asserts, a release
// one crashes in the contended path); recursion is by amd::Thread identity.
class Monitor {
 public:
  explicit Monitor(bool recursive = false);
  bool tryLock();
  void lock();
  void unlock();
  // Stand-in only.
  bool ownedByCurrentThread() const;

 private:
  Thread* lockingThread(const char* operation) const;

  std::mutex mutex_;
  std::atomic<Thread*> owner_;
  uint32_t lockCount_;
  const bool recursive_;
};

// What ScopedLock takes: the Monitor itself.
using ScopedLockable = Monitor;
#else
class MonitorBase {
 public:
  virtual ~MonitorBase() = default;
  virtual bool tryLock() = 0;
  virtual void lock() = 0;
  virtual void unlock() = 0;
};

// A std::mutex any thread may lock; locking it again from its holder
// deadlocks (here: aborts).
class Monitor : public MonitorBase {
 public:
  Monitor() = default;
  bool tryLock() override;
  void lock() override;
  void unlock() override;
  // Stand-in only.
  bool ownedByCurrentThread() const;

 private:
  std::mutex mutex_;
  std::atomic<std::thread::id> owner_{};
};

class RecursiveMonitor : public MonitorBase {
 public:
  RecursiveMonitor() = default;
  bool tryLock() override { return mutex_.try_lock(); }
  void lock() override { mutex_.lock(); }
  void unlock() override { mutex_.unlock(); }

 private:
  std::recursive_mutex mutex_;
};

// What ScopedLock takes: any MonitorBase.
using ScopedLockable = MonitorBase;
#endif

class ScopedLock {
 public:
  ScopedLock(ScopedLockable& lock) : lock_(&lock) { lock_->lock(); }
  ScopedLock(ScopedLockable* lock) : lock_(lock) {
    if (lock_ != nullptr) lock_->lock();
  }
  ~ScopedLock() {
    if (lock_ != nullptr) lock_->unlock();
  }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

 private:
  ScopedLockable* lock_;
};

// ---- Reference counting (platform/object.hpp) -----------------------------

class ReferenceCountedObject {
 public:
  ReferenceCountedObject();
  uint retain();
  // Drops a reference; the last one deletes the object.
  uint release();
  uint referenceCount() const { return count_.load(); }
  ReferenceCountedObject(const ReferenceCountedObject&) = delete;
  ReferenceCountedObject& operator=(const ReferenceCountedObject&) = delete;

 protected:
  virtual ~ReferenceCountedObject();

 private:
  std::atomic<uint> count_;
};

class RuntimeObject : public ReferenceCountedObject {};

// ---- Device memory (device/device.hpp, namespace amd::device) ------------

namespace device {
class Memory {
 public:
  explicit Memory(uint64_t va) : va_(va) {}
  virtual ~Memory() = default;
  virtual uint64_t virtualAddress() const { return va_; }

 private:
  uint64_t va_;
};

// The device's properties (device/device.hpp); only what the adapter reads.
struct Info {
  uint32_t wavefrontWidth_ = 64;
};

#if defined(STANDIN_ROCCLR_ASAN)
class UriLocator {
 public:
  virtual ~UriLocator() = default;
};
#endif
}  // namespace device

// ---- Contexts and devices (platform/context.hpp, device/device.hpp) -------

class Context : public RuntimeObject {
 public:
  Context() = default;

 protected:
  ~Context() override = default;
};

class Device {
 public:
  explicit Device(uint32_t index);
  virtual ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  Context& context() const { return *context_; }
  uint32_t index() const { return index_; }
  const device::Info& info() const { return info_; }

#if defined(STANDIN_ROCCLR_2026)
  // Registers a memory object allocated via hostcall for cleanup with the
  // device; RemoveHostcallMemory forgets one (the caller releases it). An
  // unguarded vector, as in ROCclr: its callers serialize (ROCclr's listener
  // under listenerLock); the stand-in detects concurrent entry.
  void TrackHostcallMemory(amd::Memory* memory);
  void RemoveHostcallMemory(amd::Memory* memory);
  // Stand-in only: tracked objects, and the cleanup ~Device does (which
  // dereferences each one's device memory without a null check).
  size_t trackedHostcallMemory() const;
  void releaseHostcallMemory();
#endif

#if defined(STANDIN_ROCCLR_ASAN)
  virtual device::UriLocator* createUriLocator() const;
#endif

 private:
#if defined(STANDIN_ROCCLR_2026)
  void enterTracking(const char* operation);
  void leaveTracking();
#endif

  uint32_t index_;
  Context* context_;
  device::Info info_;
#if defined(STANDIN_ROCCLR_2026)
  std::vector<amd::Memory*> hostcall_allocated_memories_;
  std::atomic<int> tracking_entered_{0};
#endif
};

// ---- Memory objects (platform/memory.hpp) ---------------------------------

class Memory : public RuntimeObject {
 public:
  typedef cl_mem_flags Flags;

  // Throws std::bad_alloc on failure (ROCclr's goes to the global operator
  // new); never returns null.
  void* operator new(size_t size, const Context& context);
  void operator delete(void* ptr, const Context& context);
  void operator delete(void* ptr);

  // Allocates the object's (simulated) device memory under the object's own
  // monitor; false on failure.
  virtual bool create(void* initFrom = nullptr, bool sysMemAlloc = false, bool skipAlloc = false,
                      bool forceAlloc = false);
  // The memory on `dev`: null before create(), for a device of another
  // context, or when the test asks for it. With `alloc` it takes the
  // object's monitor, as ROCclr's does.
  device::Memory* getDeviceMemory(const Device& dev, bool alloc = true);
  size_t getSize() const { return size_; }
  Context& getContext() const { return context_; }
  Monitor& lockMemoryOps() { return lockMemoryOps_; }

 protected:
  Memory(Context& context, Flags flags, size_t size, void* svmPtr, size_t alignment);
  ~Memory() override;

 private:
  Context& context_;
  size_t size_;
  size_t alignment_;
  void* block_ = nullptr;
  device::Memory* device_memory_ = nullptr;
  device::Memory* zero_memory_ = nullptr;
#if defined(STANDIN_ROCCLR_2026)
  Monitor lockMemoryOps_;
#else
  Monitor lockMemoryOps_{true};
#endif
};

class Buffer : public Memory {
 public:
#if defined(STANDIN_ROCCLR_2026)
  Buffer(Context& context, Flags flags, size_t size, void* svmPtr = nullptr, size_t alignment = 0)
      : Memory(context, flags, size, svmPtr, alignment) {}
#else
  Buffer(Context& context, Flags flags, size_t size, void* svmPtr = nullptr)
      : Memory(context, flags, size, svmPtr, 0) {}
#endif

 protected:
  ~Buffer() override = default;
};

// ---- Address -> memory object map (device/device.hpp) ----------------------
// 2024: under a recursive legacy Monitor; 2026: under a std::shared_mutex.

class MemObjMap {
 public:
  static size_t size();
  static void AddMemObj(const void* k, amd::Memory* v);
  // Aborts (ROCclr's guarantee) when `k` is not a key.
  static void RemoveMemObj(const void* k);
  // The object whose range holds `k`; `*offset` = k - its start.
#if defined(STANDIN_ROCCLR_2026)
  static amd::Memory* FindMemObj(const void* k, size_t* offset = nullptr, Device* dev = nullptr);
#else
  static amd::Memory* FindMemObj(const void* k, size_t* offset = nullptr);
#endif
};

// ---- Logging (utils/debug.hpp) ---------------------------------------------
// As ROCclr's: ClPrint takes a format and maybe arguments; LogPrintfError
// needs at least one argument after the format.

#define ClPrint(level, mask, format, ...) \
  ::amd::standin::log_print((level), (mask), format, ##__VA_ARGS__)
#define LogPrintfError(format, ...) ClPrint(::amd::LOG_ERROR, ::amd::LOG_ALWAYS, format, __VA_ARGS__)

// ---- Hostcall declarations (device/devhostcall.hpp) ------------------------

struct Payload {
  uint64_t slots[64][8];
};

size_t getHostcallBufferSize(uint32_t num_packets);
uint32_t getHostcallBufferAlignment(void);
#if defined(STANDIN_ROCCLR_2026) && defined(USE_NEW_HOSTCALL_IMPL)
bool enableHostcalls(const amd::Device& dev, void* buffer, uint32_t numPackets,
                     amd::Memory* occupiedMem);
#else
// The 2024 header declares only this form, whatever the build defines.
bool enableHostcalls(const amd::Device& dev, void* buffer, uint32_t numPackets);
#endif
void disableHostcalls(void* buffer);

#if defined(STANDIN_ROCCLR_RPC)
// The RPC trees (rocm-systems projects/clr, the branch of PR #4720) declare
// these here and define them in devhostcall.cpp (devrpc.hpp beside it, in
// standin_rpc/).
bool enableRpc(const amd::Device& dev, void* buffer, uint32_t num_ports);
void flushRpc(void* buffer);
void disableRpc(void* buffer);
#endif

#if defined(STANDIN_ROCCLR_ASAN)
// device/devsanitizer.hpp
void handleSanitizerService(Payload* payload, uint64_t activemask, const amd::Device* device,
                            device::UriLocator* uri_locator);
#endif

}  // namespace amd

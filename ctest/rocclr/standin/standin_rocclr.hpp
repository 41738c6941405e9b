// Stand-in for the few ROCclr classes and functions that amdgpu-dropin's
// integrations/rocclr/devhostcall.cpp uses, written from the facts of
// ROCclr's headers (names, signatures, ownership), not from its code. The
// files beside this one sit at ROCclr's include paths (top.hpp,
// utils/debug.hpp, platform/memory.hpp, device/device.hpp, ...) and include
// this one.
//
// Two trees: by default ROCm/clr of 2024 (no hostcall-memory tracking, an
// amd::Buffer without an alignment); STANDIN_ROCCLR_2026 gives rocm-systems
// projects/clr of 2026 (Device::TrackHostcallMemory / RemoveHostcallMemory,
// Buffer(ctx, flags, size, svmPtr, alignment)).
//
// Stricter than ROCclr, never kinder: every contract breach the stand-in can
// see (a release of a dead object, a second create(), a MemObjMap key added
// twice or removed unknown, tracking a block twice, calling the tracking or
// the sanitizer service without listenerLock held, locking listenerLock
// recursively) is counted in standin::violations() and printed; tests
// require 0. Memory objects are counted alive until their last release.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
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
long violations();

// amd::Memory objects alive (constructed, not yet deleted by their last release).
long live_memory();
// The next `count` Memory::create() calls fail.
void fail_next_creates(int count);
// The next `count` Memory operator new calls return null.
void fail_next_news(int count);
// What getDeviceMemory() gives for a created object.
enum class DeviceMemoryMode { kNormal, kNull, kZeroAddress };
void set_device_memory_mode(DeviceMemoryMode mode);
// The alignment a live object at device address `va` was created with
// (-1 if none is alive there).
long alignment_of(uint64_t va);
// The context a live object at device address `va` belongs to (or null).
const Context* context_of(uint64_t va);

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

}  // namespace standin

// ---- Locks (thread/monitor.hpp) ------------------------------------------

class Monitor {
 public:
  explicit Monitor(const char* name = nullptr, bool recursive = false);
  void lock();
  void unlock();
  bool ownedByCurrentThread() const;

 private:
  std::mutex mutex_;
  std::atomic<std::thread::id> owner_;
  bool recursive_;
  const char* name_;
};

class ScopedLock {
 public:
  explicit ScopedLock(Monitor& lock) : lock_(&lock) { lock_->lock(); }
  explicit ScopedLock(Monitor* lock) : lock_(lock) {
    if (lock_ != nullptr) lock_->lock();
  }
  ~ScopedLock() {
    if (lock_ != nullptr) lock_->unlock();
  }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

 private:
  Monitor* lock_;
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

#if defined(STANDIN_ROCCLR_2026)
  // Registers a memory object allocated via hostcall for cleanup with the
  // device; RemoveHostcallMemory forgets one (the caller releases it).
  void TrackHostcallMemory(amd::Memory* memory);
  void RemoveHostcallMemory(amd::Memory* memory);
  // Stand-in only: tracked objects, and the device's cleanup of them (which
  // the destructor also does).
  size_t trackedHostcallMemory() const;
  void releaseHostcallMemory();
#endif

#if defined(STANDIN_ROCCLR_ASAN)
  virtual device::UriLocator* createUriLocator() const;
#endif

 private:
  uint32_t index_;
  Context* context_;
#if defined(STANDIN_ROCCLR_2026)
  mutable std::mutex tracked_lock_;
  std::set<amd::Memory*> tracked_;
#endif
};

// ---- Memory objects (platform/memory.hpp) ---------------------------------

class Memory : public RuntimeObject {
 public:
  typedef cl_mem_flags Flags;

  // May return null (ROCclr's callers check); hence noexcept here.
  void* operator new(size_t size, const Context& context) noexcept;
  void operator delete(void* ptr, const Context& context);
  void operator delete(void* ptr);

  // Allocates the object's (simulated) device memory; false on failure.
  virtual bool create(void* initFrom = nullptr, bool sysMemAlloc = false, bool skipAlloc = false,
                      bool forceAlloc = false);
  // The memory on `dev`: null before create(), for a device of another
  // context, or when the test asks for it.
  device::Memory* getDeviceMemory(const Device& dev, bool alloc = true);
  size_t getSize() const { return size_; }
  Context& getContext() const { return context_; }

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

class MemObjMap {
 public:
  static size_t size();
  static void AddMemObj(const void* k, amd::Memory* v);
  static void RemoveMemObj(const void* k);
  // The object whose range holds `k`; `*offset` = k - its start.
  static amd::Memory* FindMemObj(const void* k, size_t* offset = nullptr);
};

// ---- Logging (utils/debug.hpp) ---------------------------------------------

#define ClPrint(level, mask, ...) ::amd::standin::log_print((level), (mask), __VA_ARGS__)
#define LogPrintfError(...) ClPrint(::amd::LOG_ERROR, ::amd::LOG_ALWAYS, __VA_ARGS__)

// ---- Hostcall declarations (device/devhostcall.hpp) ------------------------

struct Payload {
  uint64_t slots[64][8];
};

size_t getHostcallBufferSize(uint32_t num_packets);
uint32_t getHostcallBufferAlignment(void);
#if defined(USE_NEW_HOSTCALL_IMPL)
bool enableHostcalls(const amd::Device& dev, void* buffer, uint32_t numPackets,
                     amd::Memory* occupiedMem);
#else
bool enableHostcalls(const amd::Device& dev, void* buffer, uint32_t numPackets);
#endif
void disableHostcalls(void* buffer);

#if defined(STANDIN_ROCCLR_ASAN)
// device/devsanitizer.hpp
void handleSanitizerService(Payload* payload, uint64_t activemask, const amd::Device* device,
                            device::UriLocator* uri_locator);
#endif

}  // namespace amd

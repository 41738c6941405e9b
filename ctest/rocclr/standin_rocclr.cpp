// The stand-in ROCclr's definitions (see standin/standin_rocclr.hpp).
#include "standin/standin_rocclr.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <unistd.h>

namespace amd {

#if defined(STANDIN_ROCCLR_2026)
Monitor listenerLock;
#else
// As ROCclr's platform/runtime.cpp defines it: the string picks
// Monitor(bool recursive), so the lock is recursive.
Monitor listenerLock("Hostcall listener lock");
#endif

namespace details {
__thread Thread* thread_ __attribute__((tls_model("initial-exec")));
}  // namespace details

namespace standin {
namespace {

// The stand-in's own bookkeeping lock (not a ROCclr lock: any thread).
std::mutex& state_lock() {
  static auto* lock = new std::mutex();
  return *lock;
}
std::vector<LogEntry>& logs() {
  static auto* entries = new std::vector<LogEntry>();
  return *entries;
}
std::vector<SanitizerCall>& sanitizer_log() {
  static auto* calls = new std::vector<SanitizerCall>();
  return *calls;
}
// Live memory objects, by address (so a release of a dead one is caught
// without touching it).
std::set<const ReferenceCountedObject*>& live_objects() {
  static auto* objects = new std::set<const ReferenceCountedObject*>();
  return *objects;
}
std::set<const Thread*>& live_thread_set() {
  static auto* threads = new std::set<const Thread*>();
  return *threads;
}
std::set<std::thread::id>& creators() {
  static auto* ids = new std::set<std::thread::id>();
  return *ids;
}
std::map<const Context*, uint32_t>& create_delays() {
  static auto* delays = new std::map<const Context*, uint32_t>();
  return *delays;
}
// Device address -> (alignment, context) of live created objects.
struct Block {
  size_t alignment;
  const Context* context;
};
std::map<uint64_t, Block>& blocks() {
  static auto* map = new std::map<uint64_t, Block>();
  return *map;
}

std::atomic<long> violation_count{0};
std::atomic<long> live_memory_count{0};
std::atomic<int> creates_to_fail{0};
std::atomic<int> news_to_fail{0};
std::atomic<int> map_inserts_to_fail{0};
std::atomic<int> tracks_to_fail{0};
std::atomic<int> device_memory_mode{static_cast<int>(DeviceMemoryMode::kNormal)};

bool take_one(std::atomic<int>& counter) {
  int value = counter.load();
  while (value > 0) {
    if (counter.compare_exchange_weak(value, value - 1)) return true;
  }
  return false;
}

[[maybe_unused]] bool thread_alive(const Thread* thread) {
  std::lock_guard<std::mutex> guard(state_lock());
  return live_thread_set().count(thread) != 0;
}

}  // namespace

void log_print(int level, int mask, const char* format, ...) {
  char text[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  std::lock_guard<std::mutex> guard(state_lock());
  logs().push_back(LogEntry{level, mask, text});
}

std::vector<LogEntry> log_entries() {
  std::lock_guard<std::mutex> guard(state_lock());
  return logs();
}

void log_clear() {
  std::lock_guard<std::mutex> guard(state_lock());
  logs().clear();
}

size_t log_count(const char* needle) {
  std::lock_guard<std::mutex> guard(state_lock());
  size_t count = 0;
  for (const auto& entry : logs()) {
    if (entry.text.find(needle) != std::string::npos) ++count;
  }
  return count;
}

namespace {
void report(const char* kind, const char* format, va_list args) {
  char text[512];
  vsnprintf(text, sizeof(text), format, args);
  fprintf(stderr, "STAND-IN ROCCLR VIOLATION%s: %s\n", kind, text);
  fflush(stderr);
}
}  // namespace

void violation(const char* format, ...) {
  va_list args;
  va_start(args, format);
  report("", format, args);
  va_end(args);
  violation_count.fetch_add(1);
}

void fatal(const char* format, ...) {
  va_list args;
  va_start(args, format);
  report(" (ROCclr would crash, hang or assert here)", format, args);
  va_end(args);
  std::abort();
}

long violations() { return violation_count.load(); }
long live_memory() { return live_memory_count.load(); }
long live_threads() {
  std::lock_guard<std::mutex> guard(state_lock());
  return static_cast<long>(live_thread_set().size());
}
void fail_next_creates(int count) { creates_to_fail.store(count); }
void fail_next_news(int count) { news_to_fail.store(count); }
void fail_next_map_inserts(int count) { map_inserts_to_fail.store(count); }
void fail_next_tracks(int count) { tracks_to_fail.store(count); }
void set_device_memory_mode(DeviceMemoryMode mode) { device_memory_mode.store(static_cast<int>(mode)); }

void set_create_delay(const Context* context, uint32_t delay_us) {
  std::lock_guard<std::mutex> guard(state_lock());
  if (delay_us == 0) {
    create_delays().erase(context);
  } else {
    create_delays()[context] = delay_us;
  }
}

long alignment_of(uint64_t va) {
  std::lock_guard<std::mutex> guard(state_lock());
  auto it = blocks().find(va);
  return it == blocks().end() ? -1 : static_cast<long>(it->second.alignment);
}

const Context* context_of(uint64_t va) {
  std::lock_guard<std::mutex> guard(state_lock());
  auto it = blocks().find(va);
  return it == blocks().end() ? nullptr : it->second.context;
}

size_t creating_threads() {
  std::lock_guard<std::mutex> guard(state_lock());
  return creators().size();
}

std::vector<SanitizerCall> sanitizer_calls() {
  std::lock_guard<std::mutex> guard(state_lock());
  return sanitizer_log();
}

bool listener_lock_held() { return listenerLock.ownedByCurrentThread(); }

void enter_as_rocclr_thread() {
#if !defined(STANDIN_ROCCLR_2026)
  if (Thread::current() == nullptr) new HostThread();
#endif
}

void leave_as_rocclr_thread() {
  Thread* thread = Thread::current();
  details::thread_ = nullptr;
  delete thread;
}

void reset_creating_threads() {
  std::lock_guard<std::mutex> guard(state_lock());
  creators().clear();
}

}  // namespace standin

// ---- Threads ----------------------------------------------------------------------

Thread::Thread(const std::string& name, size_t stackSize, bool spawn) : name_(name) {
  (void)stackSize;
  if (spawn) standin::fatal("amd::Thread '%s': the stand-in starts no thread", name.c_str());
  std::lock_guard<std::mutex> guard(standin::state_lock());
  standin::live_thread_set().insert(this);
}

Thread::~Thread() {
  std::lock_guard<std::mutex> guard(standin::state_lock());
  standin::live_thread_set().erase(this);
}

void Thread::setCurrent() { details::thread_ = this; }

#if !defined(STANDIN_ROCCLR_2026)
HostThread::HostThread() : Thread("HostThread", 0, false) {
  if (Thread::current() != nullptr) {
    // ROCclr would rebind the thread and leak the old amd::Thread.
    standin::violation("amd::HostThread made for a thread that already is an amd::Thread");
  }
  setCurrent();
}

void HostThread::run(void* data) {
  (void)data;
  standin::fatal("HostThread::run called");
}
#endif

// ---- Monitor ----------------------------------------------------------------------

#if !defined(STANDIN_ROCCLR_2026)
Monitor::Monitor(bool recursive) : owner_(nullptr), lockCount_(0), recursive_(recursive) {}

Thread* Monitor::lockingThread(const char* operation) const {
  Thread* thread = Thread::current();
  if (thread == nullptr) {
    // A debug ROCclr asserts "cannot lock() from (null)"; a release one
    // dereferences the null thread when the lock is contended, and two
    // such threads both enter a recursive monitor (NULL == NULL owner).
    standin::fatal("%s of a legacy amd::Monitor from a thread that is no amd::Thread", operation);
  }
  if (!standin::thread_alive(thread)) {
    standin::fatal("%s of a legacy amd::Monitor from a thread whose amd::Thread was deleted",
                   operation);
  }
  return thread;
}

bool Monitor::tryLock() {
  Thread* thread = lockingThread("tryLock()");
  if (owner_.load() == thread) {
    if (!recursive_) return false;
    ++lockCount_;
    return true;
  }
  if (!mutex_.try_lock()) return false;
  owner_.store(thread);
  lockCount_ = 1;
  return true;
}

void Monitor::lock() {
  Thread* thread = lockingThread("lock()");
  if (owner_.load() == thread) {
    if (!recursive_) standin::fatal("non-recursive amd::Monitor locked again by its holder (deadlock)");
    ++lockCount_;
    return;
  }
  mutex_.lock();
  owner_.store(thread);
  lockCount_ = 1;
}

void Monitor::unlock() {
  Thread* thread = Thread::current();
  if (thread == nullptr || owner_.load() != thread) {
    standin::violation("amd::Monitor unlocked by a thread that does not hold it");
    return;
  }
  if (--lockCount_ > 0) return;
  owner_.store(nullptr);
  mutex_.unlock();
}

bool Monitor::ownedByCurrentThread() const {
  Thread* thread = Thread::current();
  return thread != nullptr && owner_.load() == thread;
}
#else
bool Monitor::tryLock() {
  if (owner_.load() == std::this_thread::get_id()) return false;
  if (!mutex_.try_lock()) return false;
  owner_.store(std::this_thread::get_id());
  return true;
}

void Monitor::lock() {
  if (owner_.load() == std::this_thread::get_id()) {
    standin::fatal("amd::Monitor (a std::mutex) locked again by its holder (deadlock)");
  }
  mutex_.lock();
  owner_.store(std::this_thread::get_id());
}

void Monitor::unlock() {
  if (owner_.load() != std::this_thread::get_id()) {
    standin::violation("amd::Monitor unlocked by a thread that does not hold it");
    return;
  }
  owner_.store(std::thread::id());
  mutex_.unlock();
}

bool Monitor::ownedByCurrentThread() const { return owner_.load() == std::this_thread::get_id(); }
#endif

// ---- Reference counting ---------------------------------------------------------

ReferenceCountedObject::ReferenceCountedObject() : count_(1) {
  std::lock_guard<std::mutex> guard(standin::state_lock());
  standin::live_objects().insert(this);
}

ReferenceCountedObject::~ReferenceCountedObject() {
  std::lock_guard<std::mutex> guard(standin::state_lock());
  standin::live_objects().erase(this);
}

uint ReferenceCountedObject::retain() {
  {
    std::lock_guard<std::mutex> guard(standin::state_lock());
    if (standin::live_objects().count(this) == 0) {
      standin::violation("retain of a dead object %p", static_cast<const void*>(this));
      return 0;
    }
  }
  return count_.fetch_add(1) + 1;
}

uint ReferenceCountedObject::release() {
  {
    std::lock_guard<std::mutex> guard(standin::state_lock());
    if (standin::live_objects().count(this) == 0) {
      standin::violation("release of a dead object %p", static_cast<const void*>(this));
      return 0;
    }
  }
  uint left = count_.fetch_sub(1) - 1;
  if (left == 0) delete this;
  return left;
}

// ---- Device ---------------------------------------------------------------------

Device::Device(uint32_t index) : index_(index), context_(new Context()) {}

Device::~Device() {
#if defined(STANDIN_ROCCLR_2026)
  releaseHostcallMemory();
#endif
  context_->release();
}

#if defined(STANDIN_ROCCLR_2026)
void Device::enterTracking(const char* operation) {
  if (!standin::listener_lock_held()) {
    standin::violation("%s without listenerLock (ROCclr calls it from its listener, under that lock)",
                       operation);
  }
  if (tracking_entered_.fetch_add(1) != 0) {
    standin::violation("%s entered while another thread is inside the tracking vector", operation);
  }
  // Widen the window in which a concurrent entry is seen.
  std::this_thread::yield();
}

void Device::leaveTracking() { tracking_entered_.fetch_sub(1); }

void Device::TrackHostcallMemory(amd::Memory* memory) {
  enterTracking("TrackHostcallMemory");
  if (std::find(hostcall_allocated_memories_.begin(), hostcall_allocated_memories_.end(), memory) !=
      hostcall_allocated_memories_.end()) {
    // ROCclr would keep it twice and release it twice in ~Device.
    standin::violation("TrackHostcallMemory(%p): already tracked", static_cast<void*>(memory));
  }
  if (standin::take_one(standin::tracks_to_fail)) {
    leaveTracking();
    throw std::bad_alloc();
  }
  hostcall_allocated_memories_.push_back(memory);
  leaveTracking();
}

void Device::RemoveHostcallMemory(amd::Memory* memory) {
  enterTracking("RemoveHostcallMemory");
  auto it =
      std::find(hostcall_allocated_memories_.begin(), hostcall_allocated_memories_.end(), memory);
  if (it == hostcall_allocated_memories_.end()) {
    standin::violation("RemoveHostcallMemory(%p): not tracked", static_cast<void*>(memory));
  } else {
    hostcall_allocated_memories_.erase(it);
  }
  leaveTracking();
}

size_t Device::trackedHostcallMemory() const { return hostcall_allocated_memories_.size(); }

void Device::releaseHostcallMemory() {
  for (amd::Memory* memory : hostcall_allocated_memories_) {
    // As ~Device: no null check of the device memory.
    device::Memory* dm = memory->getDeviceMemory(*this, false);
    if (dm == nullptr) standin::fatal("~Device: a tracked object without device memory (null dereference)");
    MemObjMap::RemoveMemObj(reinterpret_cast<void*>(dm->virtualAddress()));
    memory->release();
  }
  hostcall_allocated_memories_.clear();
}
#endif

#if defined(STANDIN_ROCCLR_ASAN)
device::UriLocator* Device::createUriLocator() const { return new device::UriLocator(); }

void handleSanitizerService(Payload* payload, uint64_t activemask, const amd::Device* device,
                            device::UriLocator* uri_locator) {
  if (!standin::listener_lock_held()) {
    standin::violation("handleSanitizerService without listenerLock (ROCclr calls it from its listener)");
  }
  // ROCclr's report path is ROCclr code: it may take ROCclr's locks.
  static auto* reportLock = new Monitor();
  ScopedLock lock(*reportLock);
  standin::SanitizerCall call{activemask, device, uri_locator, {}};
  if (activemask != 0) {
    std::memcpy(call.first_slot, payload->slots[__builtin_ctzll(activemask)], sizeof(call.first_slot));
  }
  std::lock_guard<std::mutex> guard(standin::state_lock());
  standin::sanitizer_log().push_back(call);
}
#endif

// ---- Memory -----------------------------------------------------------------------

void* Memory::operator new(size_t size, const Context& context) {
  (void)context;
  if (standin::take_one(standin::news_to_fail)) throw std::bad_alloc();
  return ::operator new(size);
}

void Memory::operator delete(void* ptr, const Context& context) {
  (void)context;
  ::operator delete(ptr);
}

void Memory::operator delete(void* ptr) { ::operator delete(ptr); }

Memory::Memory(Context& context, Flags flags, size_t size, void* svmPtr, size_t alignment)
    : context_(context), size_(size), alignment_(alignment) {
  (void)flags;
  (void)svmPtr;
  context_.retain();
  standin::live_memory_count.fetch_add(1);
}

Memory::~Memory() {
  if (block_ != nullptr) {
    auto va = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(block_));
    if (MemObjMap::FindMemObj(block_) == this) {
      standin::violation("memory object %p deleted while still in MemObjMap", static_cast<void*>(this));
    }
    std::lock_guard<std::mutex> guard(standin::state_lock());
    standin::blocks().erase(va);
  }
  std::free(block_);
  delete device_memory_;
  delete zero_memory_;
  context_.release();
  standin::live_memory_count.fetch_sub(1);
}

bool Memory::create(void* initFrom, bool sysMemAlloc, bool skipAlloc, bool forceAlloc) {
  (void)initFrom;
  (void)sysMemAlloc;
  (void)skipAlloc;
  (void)forceAlloc;
  ScopedLock lock(lockMemoryOps_);
  uint32_t delay_us = 0;
  {
    std::lock_guard<std::mutex> guard(standin::state_lock());
    standin::creators().insert(std::this_thread::get_id());
    auto it = standin::create_delays().find(&context_);
    if (it != standin::create_delays().end()) delay_us = it->second;
  }
  if (delay_us != 0) usleep(delay_us);
  if (block_ != nullptr) {
    standin::violation("create() called twice on %p", static_cast<void*>(this));
    return false;
  }
  if (standin::take_one(standin::creates_to_fail)) return false;
  size_t align = alignment_ > 256 ? alignment_ : 256;
  size_t bytes = (size_ + align - 1) / align * align;
  block_ = std::aligned_alloc(align, bytes == 0 ? align : bytes);
  if (block_ == nullptr) return false;
  // Device memory is not zeroed: a caller that needs zeroes writes them.
  std::memset(block_, 0xA5, bytes == 0 ? align : bytes);
  auto va = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(block_));
  device_memory_ = new device::Memory(va);
  zero_memory_ = new device::Memory(0);
  std::lock_guard<std::mutex> guard(standin::state_lock());
  standin::blocks()[va] = standin::Block{alignment_, &context_};
  return true;
}

device::Memory* Memory::getDeviceMemory(const Device& dev, bool alloc) {
  // ROCclr allocates on demand under the object's monitor.
  ScopedLock lock(alloc ? &lockMemoryOps_ : nullptr);
  if (device_memory_ == nullptr || &dev.context() != &context_) return nullptr;
  switch (static_cast<standin::DeviceMemoryMode>(standin::device_memory_mode.load())) {
    case standin::DeviceMemoryMode::kNull:
      return nullptr;
    case standin::DeviceMemoryMode::kZeroAddress:
      return zero_memory_;
    case standin::DeviceMemoryMode::kNormal:
      break;
  }
  return device_memory_;
}

// ---- MemObjMap ----------------------------------------------------------------------

namespace {

std::map<uintptr_t, Memory*>& memObjMap() {
  static auto* map = new std::map<uintptr_t, Memory*>();
  return *map;
}

#if defined(STANDIN_ROCCLR_2026)
std::shared_mutex& allocatedLock() {
  static auto* lock = new std::shared_mutex();
  return *lock;
}
using ReadLock = std::shared_lock<std::shared_mutex>;
using WriteLock = std::unique_lock<std::shared_mutex>;
#else
// As device.cpp: Monitor AllocatedLock_("Guards MemObjMap allocation list"),
// recursive by the same conversion as listenerLock.
Monitor& allocatedLock() {
  static auto* lock = new Monitor("Guards MemObjMap allocation list");
  return *lock;
}
using ReadLock = ScopedLock;
using WriteLock = ScopedLock;
#endif

// Detects two threads inside the map at once (which the lock must prevent).
std::atomic<int> map_entered{0};
struct MapEntry {
  MapEntry() {
    if (map_entered.fetch_add(1) != 0) standin::violation("two threads inside MemObjMap's map at once");
  }
  ~MapEntry() { map_entered.fetch_sub(1); }
};

}  // namespace

size_t MemObjMap::size() {
  ReadLock lock(allocatedLock());
  return memObjMap().size();
}

void MemObjMap::AddMemObj(const void* k, amd::Memory* v) {
  WriteLock lock(allocatedLock());
  MapEntry entry;
  if (standin::take_one(standin::map_inserts_to_fail)) throw std::bad_alloc();
  if (!memObjMap().emplace(reinterpret_cast<uintptr_t>(k), v).second) {
    standin::violation("MemObjMap::AddMemObj(%p): key already present", k);
  }
}

void MemObjMap::RemoveMemObj(const void* k) {
  WriteLock lock(allocatedLock());
  MapEntry entry;
  if (memObjMap().erase(reinterpret_cast<uintptr_t>(k)) == 0) {
    standin::fatal("MemObjMap::RemoveMemObj(%p): unknown key (ROCclr's guarantee aborts)", k);
  }
}

#if defined(STANDIN_ROCCLR_2026)
amd::Memory* MemObjMap::FindMemObj(const void* k, size_t* offset, Device* dev) {
  (void)dev;  // the per-device search is Windows-only
#else
amd::Memory* MemObjMap::FindMemObj(const void* k, size_t* offset) {
#endif
  ReadLock lock(allocatedLock());
  auto& map = memObjMap();
  auto key = reinterpret_cast<uintptr_t>(k);
  auto it = map.upper_bound(key);
  if (it == map.begin()) return nullptr;
  --it;
  if (key - it->first >= it->second->getSize()) return nullptr;
  if (offset != nullptr) *offset = key - it->first;
  return it->second;
}

}  // namespace amd

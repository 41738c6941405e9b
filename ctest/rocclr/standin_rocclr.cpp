// The stand-in ROCclr's definitions (see standin/standin_rocclr.hpp).
#include "standin/standin_rocclr.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace amd {

// As ROCclr's platform/runtime.cpp defines it.
Monitor listenerLock("Hostcall listener lock");

namespace standin {
namespace {

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
std::map<uintptr_t, Memory*>& mem_obj_map() {
  static auto* map = new std::map<uintptr_t, Memory*>();
  return *map;
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
std::atomic<int> device_memory_mode{static_cast<int>(DeviceMemoryMode::kNormal)};

bool take_one(std::atomic<int>& counter) {
  int value = counter.load();
  while (value > 0) {
    if (counter.compare_exchange_weak(value, value - 1)) return true;
  }
  return false;
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

void violation(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  fprintf(stderr, "STAND-IN ROCCLR VIOLATION: %s\n", text);
  fflush(stderr);
  violation_count.fetch_add(1);
}

long violations() { return violation_count.load(); }
long live_memory() { return live_memory_count.load(); }
void fail_next_creates(int count) { creates_to_fail.store(count); }
void fail_next_news(int count) { news_to_fail.store(count); }
void set_device_memory_mode(DeviceMemoryMode mode) { device_memory_mode.store(static_cast<int>(mode)); }

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

std::vector<SanitizerCall> sanitizer_calls() {
  std::lock_guard<std::mutex> guard(state_lock());
  return sanitizer_log();
}

bool listener_lock_held() { return listenerLock.ownedByCurrentThread(); }

}  // namespace standin

// ---- Monitor ------------------------------------------------------------------

Monitor::Monitor(const char* name, bool recursive)
    : owner_(std::thread::id()), recursive_(recursive), name_(name) {}

void Monitor::lock() {
  if (!recursive_ && owner_.load() == std::this_thread::get_id()) {
    standin::violation("monitor '%s' locked again by the thread holding it (it would deadlock)",
                       name_ != nullptr ? name_ : "");
    std::abort();
  }
  mutex_.lock();
  owner_.store(std::this_thread::get_id());
}

void Monitor::unlock() {
  if (owner_.load() != std::this_thread::get_id()) {
    standin::violation("monitor '%s' unlocked by a thread that does not hold it",
                       name_ != nullptr ? name_ : "");
    return;
  }
  owner_.store(std::thread::id());
  mutex_.unlock();
}

bool Monitor::ownedByCurrentThread() const { return owner_.load() == std::this_thread::get_id(); }

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
void Device::TrackHostcallMemory(amd::Memory* memory) {
  if (!standin::listener_lock_held()) {
    standin::violation("TrackHostcallMemory without listenerLock (ROCclr calls it from its listener)");
  }
  std::lock_guard<std::mutex> guard(tracked_lock_);
  if (!tracked_.insert(memory).second) {
    standin::violation("TrackHostcallMemory(%p): already tracked", static_cast<void*>(memory));
  }
}

void Device::RemoveHostcallMemory(amd::Memory* memory) {
  if (!standin::listener_lock_held()) {
    standin::violation("RemoveHostcallMemory without listenerLock (ROCclr calls it from its listener)");
  }
  std::lock_guard<std::mutex> guard(tracked_lock_);
  if (tracked_.erase(memory) == 0) {
    standin::violation("RemoveHostcallMemory(%p): not tracked", static_cast<void*>(memory));
  }
}

size_t Device::trackedHostcallMemory() const {
  std::lock_guard<std::mutex> guard(tracked_lock_);
  return tracked_.size();
}

void Device::releaseHostcallMemory() {
  std::set<amd::Memory*> tracked;
  {
    std::lock_guard<std::mutex> guard(tracked_lock_);
    tracked.swap(tracked_);
  }
  for (amd::Memory* memory : tracked) {
    auto* dm = memory->getDeviceMemory(*this);
    if (dm != nullptr) MemObjMap::RemoveMemObj(reinterpret_cast<void*>(dm->virtualAddress()));
    memory->release();
  }
}
#endif

#if defined(STANDIN_ROCCLR_ASAN)
device::UriLocator* Device::createUriLocator() const { return new device::UriLocator(); }

void handleSanitizerService(Payload* payload, uint64_t activemask, const amd::Device* device,
                            device::UriLocator* uri_locator) {
  if (!standin::listener_lock_held()) {
    standin::violation("handleSanitizerService without listenerLock (ROCclr calls it from its listener)");
  }
  standin::SanitizerCall call{activemask, device, uri_locator, {}};
  if (activemask != 0) {
    std::memcpy(call.first_slot, payload->slots[__builtin_ctzll(activemask)], sizeof(call.first_slot));
  }
  std::lock_guard<std::mutex> guard(standin::state_lock());
  standin::sanitizer_log().push_back(call);
}
#endif

// ---- Memory -----------------------------------------------------------------------

void* Memory::operator new(size_t size, const Context& context) noexcept {
  (void)context;
  if (standin::take_one(standin::news_to_fail)) return nullptr;
  return ::operator new(size, std::nothrow);
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
    std::lock_guard<std::mutex> guard(standin::state_lock());
    auto va = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(block_));
    standin::blocks().erase(va);
    if (standin::mem_obj_map().count(va) != 0) {
      standin::violation("memory object %p deleted while still in MemObjMap", static_cast<void*>(this));
    }
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
  (void)alloc;
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

size_t MemObjMap::size() {
  std::lock_guard<std::mutex> guard(standin::state_lock());
  return standin::mem_obj_map().size();
}

void MemObjMap::AddMemObj(const void* k, amd::Memory* v) {
  std::lock_guard<std::mutex> guard(standin::state_lock());
  if (!standin::mem_obj_map().emplace(reinterpret_cast<uintptr_t>(k), v).second) {
    standin::violation("MemObjMap::AddMemObj(%p): key already present", k);
  }
}

void MemObjMap::RemoveMemObj(const void* k) {
  std::lock_guard<std::mutex> guard(standin::state_lock());
  if (standin::mem_obj_map().erase(reinterpret_cast<uintptr_t>(k)) == 0) {
    standin::violation("MemObjMap::RemoveMemObj(%p): unknown key", k);
  }
}

amd::Memory* MemObjMap::FindMemObj(const void* k, size_t* offset) {
  std::lock_guard<std::mutex> guard(standin::state_lock());
  auto& map = standin::mem_obj_map();
  auto key = reinterpret_cast<uintptr_t>(k);
  auto it = map.upper_bound(key);
  if (it == map.begin()) return nullptr;
  --it;
  if (key - it->first >= it->second->getSize()) return nullptr;
  if (offset != nullptr) *offset = key - it->first;
  return it->second;
}

}  // namespace amd

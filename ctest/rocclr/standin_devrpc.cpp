// The stand-in devrpc.cpp and devhcmessages.cpp (see standin_rpc/device/devrpc.hpp).
#include "standin_rpc/device/devrpc.hpp"
#include "standin_rpc/device/devhcmessages.hpp"

#include <hsa/hsa.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace amd {
namespace {

// The stand-in buffer: the doorbell, then the ports.
struct Header {
  std::atomic<uint64_t> doorbell;
  uint64_t reserved;
};
enum PortState : uint32_t { kFree = 0, kClaimed = 1, kPosted = 2, kAnswered = 3 };
struct Port {
  std::atomic<uint32_t> state;
  uint32_t opcode;
  uint64_t words[8];
};

Header* headerOf(void* buffer) { return static_cast<Header*>(buffer); }
Port* portsOf(void* buffer) { return reinterpret_cast<Port*>(static_cast<char*>(buffer) + sizeof(Header)); }

std::mutex& countersLock() {
  static auto* lock = new std::mutex();
  return *lock;
}
std::map<const void*, long>& processCalls() {
  static auto* calls = new std::map<const void*, long>();
  return *calls;
}
std::map<const void*, long>& flushCalls() {
  static auto* calls = new std::map<const void*, long>();
  return *calls;
}
std::atomic<long> servedCount{0};
std::atomic<long> printfCount{0};

void count(std::map<const void*, long>& calls, const void* buffer) {
  std::lock_guard<std::mutex> guard(countersLock());
  ++calls[buffer];
}

long total(std::map<const void*, long>& calls, const void* buffer) {
  std::lock_guard<std::mutex> guard(countersLock());
  if (buffer != nullptr) {
    auto it = calls.find(buffer);
    return it == calls.end() ? 0 : it->second;
  }
  long sum = 0;
  for (const auto& entry : calls) sum += entry.second;
  return sum;
}

bool checkInfo(const RpcBufferInfo* info, const char* who) {
  if (info == nullptr || info->buffer == nullptr || info->device == nullptr || info->messages == nullptr) {
    standin::violation("%s with an incomplete RpcBufferInfo (ROCclr dereferences its buffer, device and messages)",
                       who);
    return false;
  }
  if (!standin::listener_lock_held()) {
    standin::violation("%s without listenerLock (ROCclr calls it only under that lock)", who);
  }
  return true;
}

typedef void (*HostFunction)(uint64_t* output, const uint64_t* input);

void serve(const RpcBufferInfo* info, Port& port) {
  uint64_t* words = port.words;
  switch (port.opcode) {
    case ROCM_HOSTCALL_FUNCTION: {
      uint64_t output[2] = {0, 0};
      reinterpret_cast<HostFunction>(static_cast<uintptr_t>(words[0]))(output, words + 1);
      words[0] = output[0];
      words[1] = output[1];
      break;
    }
    case ROCM_HOSTCALL_PRINTF:
      info->messages->handlePayload(SERVICE_PRINTF, words);
      break;
    default:
      // No libc opcode is modelled: an unknown request is answered all ones.
      words[0] = ~0ull;
      break;
  }
  servedCount.fetch_add(1);
  port.state.store(kAnswered, std::memory_order_release);
}

// Serves up to `limit` posted ports; returns how many.
uint32_t servePosted(const RpcBufferInfo* info, uint32_t limit) {
  uint32_t done = 0;
  Port* ports = portsOf(info->buffer);
  for (uint32_t i = 0; i < info->port_count && done < limit; ++i) {
    if (ports[i].state.load(std::memory_order_acquire) == kPosted) {
      serve(info, ports[i]);
      ++done;
    }
  }
  return done;
}

}  // namespace

bool rpcAvailable() { return true; }

size_t getRpcBufferSize(uint32_t num_lanes, uint32_t num_ports) {
  (void)num_lanes;
  return sizeof(Header) + static_cast<size_t>(num_ports) * sizeof(Port);
}

#if defined(STANDIN_ROCCLR_RPC_SINGLE)
void processRpcBuffer(RpcBufferInfo* info) {
  if (!checkInfo(info, "processRpcBuffer")) return;
  count(processCalls(), info->buffer);
  servePosted(info, 1);
}
#else
bool processRpcBuffer(RpcBufferInfo* info) {
  if (!checkInfo(info, "processRpcBuffer")) return false;
  count(processCalls(), info->buffer);
  return servePosted(info, info->port_count) > 0;
}
#endif

void flushRpcBuffer(RpcBufferInfo* info) {
  if (!checkInfo(info, "flushRpcBuffer")) return;
  count(flushCalls(), info->buffer);
  while (servePosted(info, info->port_count) > 0) {
  }
}

size_t getRpcClientSize() { return sizeof(void*) + sizeof(uint32_t); }

void initRpcClient(void* staging, void* buffer, uint32_t num_ports) {
  std::memcpy(staging, &buffer, sizeof(buffer));
  std::memcpy(static_cast<char*>(staging) + sizeof(buffer), &num_ports, sizeof(num_ports));
}

void initRpcDoorbell(void* buffer, void* signal_handle) {
  if (buffer == nullptr || signal_handle == nullptr) {
    standin::violation("initRpcDoorbell(%p, %p): ROCclr reads the signal behind the handle", buffer, signal_handle);
    return;
  }
  headerOf(buffer)->doorbell.store(reinterpret_cast<uintptr_t>(signal_handle), std::memory_order_release);
}

MessageHandler::~MessageHandler() = default;

bool MessageHandler::handlePayload(uint32_t service, uint64_t* payload) {
  if (inside_.fetch_add(1) != 0) {
    standin::violation("MessageHandler entered by two threads at once (it has no lock of its own)");
  }
  bool ok = service == SERVICE_PRINTF && payload != nullptr;
  if (ok) {
    received_.push_back(payload[0]);
    printfCount.fetch_add(1);
  }
  inside_.fetch_sub(1);
  return ok;
}

namespace standin {
namespace rpc {

int post(void* buffer, uint32_t ports, uint32_t opcode, const uint64_t words[8]) {
  Port* slots = portsOf(buffer);
  for (uint32_t i = 0; i < ports; ++i) {
    uint32_t expected = kFree;
    if (slots[i].state.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) {
      slots[i].opcode = opcode;
      std::memcpy(slots[i].words, words, sizeof(slots[i].words));
      slots[i].state.store(kPosted, std::memory_order_release);
      return static_cast<int>(i);
    }
  }
  return -1;
}

void ring(void* buffer) {
  uint64_t handle = doorbell(buffer);
  if (handle == 0) {
    violation("rpc::ring before initRpcDoorbell");
    return;
  }
  hsa_signal_add_screlease(hsa_signal_t{handle}, 1);
}

uint64_t doorbell(void* buffer) { return headerOf(buffer)->doorbell.load(std::memory_order_acquire); }

bool answered(void* buffer, int port) {
  return portsOf(buffer)[port].state.load(std::memory_order_acquire) == kAnswered;
}

int wait(void* buffer, int port, uint64_t words[8], uint64_t timeout_ns) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout_ns);
  Port& slot = portsOf(buffer)[port];
  while (slot.state.load(std::memory_order_acquire) != kAnswered) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::yield();
  }
  std::memcpy(words, slot.words, sizeof(slot.words));
  slot.state.store(kFree, std::memory_order_release);
  return 0;
}

int call(void* buffer, uint32_t ports, uint32_t opcode, uint64_t words[8], uint64_t timeout_ns) {
  int port = post(buffer, ports, opcode, words);
  if (port < 0) return -1;
  ring(buffer);
  return wait(buffer, port, words, timeout_ns);
}

long process_calls(const void* buffer) { return total(processCalls(), buffer); }
long flush_calls(const void* buffer) { return total(flushCalls(), buffer); }
long served() { return servedCount.load(); }
long printf_payloads() { return printfCount.load(); }

}  // namespace rpc
}  // namespace standin
}  // namespace amd

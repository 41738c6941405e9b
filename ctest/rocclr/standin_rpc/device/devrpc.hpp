// Stand-in at ROCclr's include path device/devrpc.hpp, for the rocm-systems
// projects/clr trees with RPC buffers (the branch of PR #4720: a7c0a52f, and
// 22d8a787 with STANDIN_ROCCLR_RPC_SINGLE, whose processRpcBuffer returns
// nothing and serves at most one request per call). The names, opcodes and
// signatures are those trees' (docs/rocclr.md); the buffer behind them is
// the stand-in's own (standin_devrpc.cpp), not LLVM libc's rpc::Server.
//
// This directory is on the include path of the RPC builds only: the adapter
// takes the presence of this header as the sign of an RPC tree, as it is in
// ROCclr.
//
// Stricter than ROCclr: processRpcBuffer and flushRpcBuffer must be called
// with amd::listenerLock held (ROCclr's listener and flushRpc call them only
// so; the MessageHandler and the DEVMEM path they use have no lock of their
// own), with a complete RpcBufferInfo (non-null device and messages); a
// doorbell handle of 0 and a MessageHandler entered by two threads at once
// are contract breaches too (standin::violations()).
#pragma once
#include "../../standin/standin_rocclr.hpp"

enum : uint32_t {
  ROCM_HOSTCALL_FUNCTION = ('r' << 24) | 0,
  ROCM_HOSTCALL_DEVMEM = ('r' << 24) | 1,
  ROCM_HOSTCALL_SANITIZER = ('r' << 24) | 2,
  ROCM_HOSTCALL_PRINTF = ('r' << 24) | 3,
};

namespace amd {

class MessageHandler;

constexpr uint64_t kMaxRpcPortCount = 16384;

struct RpcBufferInfo {
  void* buffer;
  uint32_t num_lanes;
  uint32_t port_count;
  const amd::Device* device;
  MessageHandler* messages = nullptr;
};

bool rpcAvailable();
size_t getRpcBufferSize(uint32_t num_lanes, uint32_t num_ports);
#if defined(STANDIN_ROCCLR_RPC_SINGLE)
void processRpcBuffer(RpcBufferInfo* info);
#else
bool processRpcBuffer(RpcBufferInfo* info);
#endif
void flushRpcBuffer(RpcBufferInfo* info);
size_t getRpcClientSize();
void initRpcClient(void* staging, void* buffer, uint32_t num_ports);
void initRpcDoorbell(void* buffer, void* signal_handle);

namespace standin {
namespace rpc {

// The device side, for the tests. A stand-in RPC buffer of `ports` ports
// (getRpcBufferSize bytes, zeroed) holds the doorbell handle initRpcDoorbell
// wrote, then one request slot per port: opcode and 8 words.
//
// Claims a free port and posts `opcode` with `words`; returns the port, or
// -1 when every port is taken.
int post(void* buffer, uint32_t ports, uint32_t opcode, const uint64_t words[8]);
// Adds 1 to the doorbell signal initRpcDoorbell stored (as device code rings).
void ring(void* buffer);
// The doorbell handle initRpcDoorbell stored (0 before).
uint64_t doorbell(void* buffer);
bool answered(void* buffer, int port);
// Waits (spinning, up to timeout_ns) for the answer, copies its words out and
// frees the port; -1 on timeout (the port stays posted).
int wait(void* buffer, int port, uint64_t words[8], uint64_t timeout_ns);
// post, ring, wait.
int call(void* buffer, uint32_t ports, uint32_t opcode, uint64_t words[8], uint64_t timeout_ns);

// Counters: calls of processRpcBuffer / flushRpcBuffer for `buffer` (any
// buffer when null), requests served, PRINTF payloads handed to a
// MessageHandler.
long process_calls(const void* buffer);
long flush_calls(const void* buffer);
long served();
long printf_payloads();

}  // namespace rpc
}  // namespace standin
}  // namespace amd

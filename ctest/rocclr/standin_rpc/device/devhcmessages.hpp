// Stand-in at ROCclr's include path device/devhcmessages.hpp: the printf
// message assembler ROCclr's listener keeps (one for every buffer) and
// devrpc.cpp hands ROCM_HOSTCALL_PRINTF payloads to. As in ROCclr it has no
// lock: its user serializes (ROCclr under listenerLock); the stand-in
// counts an entry while another thread is inside as a violation.
#pragma once
#include "../../standin/standin_rocclr.hpp"

#include <atomic>
#include <vector>

namespace amd {

enum ServiceID { SERVICE_RESERVED = 0, SERVICE_FUNCTION_CALL = 1, SERVICE_PRINTF = 2, SERVICE_DEVMEM = 3 };

class MessageHandler {
 public:
  MessageHandler() = default;
  ~MessageHandler();
  MessageHandler(const MessageHandler&) = delete;
  MessageHandler& operator=(const MessageHandler&) = delete;
  bool handlePayload(uint32_t service, uint64_t* payload);

 private:
  std::vector<uint64_t> received_;
  std::atomic<int> inside_{0};
};

}  // namespace amd

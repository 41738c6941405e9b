/* Device simulator: DEVMEM and SANITIZER encoders (see device_sim_services.h). */
#include "device_sim_services.h"

#include <string.h>

#include "device_sim.h"

void device_sim_encode_devmem(uint64_t slot[8], uint64_t address, uint64_t size) {
  memset(slot, 0, 8 * sizeof(uint64_t));
  slot[0] = address;
  slot[1] = size;
}

void device_sim_encode_sanitizer(uint64_t slot[8], uint64_t address, uint64_t pc,
                                 const uint64_t workgroup[3], uint64_t lane_id, bool is_write,
                                 bool recoverable, uint64_t access_size) {
  slot[0] = address;
  slot[1] = pc;
  slot[2] = workgroup[0];
  slot[3] = workgroup[1];
  slot[4] = workgroup[2];
  slot[5] = lane_id;
  slot[6] = (is_write ? 1u : 0u) | (recoverable ? DEVICE_SIM_SANITIZER_RECOVERABLE : 0u);
  slot[7] = access_size;
}

int device_sim_devmem_request(void* buffer, uint64_t activemask, const uint64_t address[64],
                              const uint64_t size[64], uint64_t answer[64], uint64_t timeout_ns) {
  if (address == NULL || size == NULL || answer == NULL) return DEVICE_SIM_ERR_ARGUMENT;
  uint64_t lanes[64][8];
  memset(lanes, 0, sizeof(lanes));
  for (uint32_t lane = 0; lane < 64; ++lane) {
    if (activemask & (1ull << lane)) device_sim_encode_devmem(lanes[lane], address[lane], size[lane]);
  }
  int rc = device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_DEVMEM, activemask, lanes, timeout_ns);
  if (rc != DEVICE_SIM_OK) return rc;
  for (uint32_t lane = 0; lane < 64; ++lane) {
    if (activemask & (1ull << lane)) answer[lane] = lanes[lane][0];
  }
  return DEVICE_SIM_OK;
}

int device_sim_sanitizer_report(void* buffer, uint64_t activemask, const uint64_t address[64],
                                uint64_t pc, const uint64_t workgroup[3], bool is_write,
                                bool recoverable, uint64_t access_size, uint64_t timeout_ns) {
  if (address == NULL || workgroup == NULL) return DEVICE_SIM_ERR_ARGUMENT;
  uint64_t lanes[64][8];
  memset(lanes, 0, sizeof(lanes));
  for (uint32_t lane = 0; lane < 64; ++lane) {
    if (activemask & (1ull << lane)) {
      device_sim_encode_sanitizer(lanes[lane], address[lane], pc, workgroup, lane, is_write,
                                  recoverable, access_size);
    }
  }
  return device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_SANITIZER, activemask, lanes, timeout_ns);
}

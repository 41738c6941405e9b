/* Device simulator: DEVMEM and SANITIZER requests encoded as the ROCm device
 * libraries (ockl) encode them, one lane per request.
 *
 *   DEVMEM (3), __ockl_devmem_request(address, size):
 *     slot[0] = address, slot[1] = size, slot[2..7] = 0; the answer is
 *     slot[0]. Allocate: address 0, size > 0 -> device address or 0. Free:
 *     address != 0, size 0 -> the answer is ignored by the device.
 *   SANITIZER (4), __ockl_sanitizer_report(addr, pc, wgx, wgy, wgz, id,
 *     access_info, size): slot[0] = bad address, [1] = pc, [2..4] = workgroup
 *     id x, y, z, [5] = local linear id of the lane, [6] = access info (bit 0
 *     = write; upper 32 bits all set = recoverable), [7] = access size.
 *     The answer is ignored.
 */
#ifndef AMDGPU_DROPIN_DEVICE_SIM_SERVICES_H
#define AMDGPU_DROPIN_DEVICE_SIM_SERVICES_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEVICE_SIM_SERVICE_DEVMEM 3u
#define DEVICE_SIM_SERVICE_SANITIZER 4u

/* Access-info bits the asan runtime sets for a recoverable report. */
#define DEVICE_SIM_SANITIZER_RECOVERABLE 0xFFFFFFFF00000000ull

/* Writes one DEVMEM request into lane words `slot`. */
void device_sim_encode_devmem(uint64_t slot[8], uint64_t address, uint64_t size);

/* Writes one SANITIZER report into lane words `slot`. */
void device_sim_encode_sanitizer(uint64_t slot[8], uint64_t address, uint64_t pc,
                                 const uint64_t workgroup[3], uint64_t lane_id, bool is_write,
                                 bool recoverable, uint64_t access_size);

/* One DEVMEM call from every lane of `activemask`: lane i asks for
 * (address[i], size[i]); answer[i] receives slot[0] of lane i. Returns
 * DEVICE_SIM_OK or a negative DEVICE_SIM_ERR_*. */
int device_sim_devmem_request(void* buffer, uint64_t activemask, const uint64_t address[64],
                              const uint64_t size[64], uint64_t answer[64], uint64_t timeout_ns);

/* One wave's SANITIZER report: every lane of `activemask` reports
 * address[i] with the shared pc, workgroup and access. */
int device_sim_sanitizer_report(void* buffer, uint64_t activemask, const uint64_t address[64],
                                uint64_t pc, const uint64_t workgroup[3], bool is_write,
                                bool recoverable, uint64_t access_size, uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif

#endif /* AMDGPU_DROPIN_DEVICE_SIM_SERVICES_H */

/*
 * amdgpu-dropin test suite: a subset of the HSA core API.
 *
 * Written for this project. Names, values and signatures match the HSA
 * runtime's public ABI (ROCr's hsa.h) so that code compiled against this
 * file also compiles against the real header; only what the project uses is
 * declared. The software runtime in ctest/hsa_runtime/ implements it.
 */
#ifndef AMDGPU_DROPIN_TEST_HSA_H_
#define AMDGPU_DROPIN_TEST_HSA_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef HSA_API
#define HSA_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
typedef enum {
  HSA_STATUS_SUCCESS = 0x0,
  HSA_STATUS_INFO_BREAK = 0x1,
  HSA_STATUS_ERROR = 0x1000,
  HSA_STATUS_ERROR_INVALID_ARGUMENT = 0x1001,
  HSA_STATUS_ERROR_INVALID_QUEUE_CREATION = 0x1002,
  HSA_STATUS_ERROR_INVALID_ALLOCATION = 0x1003,
  HSA_STATUS_ERROR_INVALID_AGENT = 0x1004,
  HSA_STATUS_ERROR_INVALID_REGION = 0x1005,
  HSA_STATUS_ERROR_INVALID_SIGNAL = 0x1006,
  HSA_STATUS_ERROR_INVALID_QUEUE = 0x1007,
  HSA_STATUS_ERROR_OUT_OF_RESOURCES = 0x1008,
  HSA_STATUS_ERROR_INVALID_PACKET_FORMAT = 0x1009,
  HSA_STATUS_ERROR_RESOURCE_FREE = 0x100A,
  HSA_STATUS_ERROR_NOT_INITIALIZED = 0x100B,
  HSA_STATUS_ERROR_REFCOUNT_OVERFLOW = 0x100C,
  HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS = 0x100D,
  HSA_STATUS_ERROR_INVALID_INDEX = 0x100E,
  HSA_STATUS_ERROR_INVALID_ISA = 0x100F,
  HSA_STATUS_ERROR_INVALID_ISA_NAME = 0x1017,
  HSA_STATUS_ERROR_INVALID_CODE_OBJECT = 0x1010,
  HSA_STATUS_ERROR_INVALID_EXECUTABLE = 0x1011,
  HSA_STATUS_ERROR_FROZEN_EXECUTABLE = 0x1012,
  HSA_STATUS_ERROR_INVALID_SYMBOL_NAME = 0x1013,
  HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED = 0x1014,
  HSA_STATUS_ERROR_VARIABLE_UNDEFINED = 0x1015,
  HSA_STATUS_ERROR_EXCEPTION = 0x1016,
  HSA_STATUS_ERROR_INVALID_CODE_SYMBOL = 0x1018,
  HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL = 0x1019,
  HSA_STATUS_ERROR_INVALID_FILE = 0x1020,
  HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER = 0x1021,
  HSA_STATUS_ERROR_INVALID_CACHE = 0x1022,
  HSA_STATUS_ERROR_INVALID_WAVEFRONT = 0x1023,
  HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP = 0x1024,
  HSA_STATUS_ERROR_INVALID_RUNTIME_STATE = 0x1025,
  HSA_STATUS_ERROR_FATAL = 0x1026
} hsa_status_t;

HSA_API hsa_status_t hsa_status_string(hsa_status_t status,
                                       const char** status_string);

/* Runtime lifetime (reference counted). */
HSA_API hsa_status_t hsa_init(void);
HSA_API hsa_status_t hsa_shut_down(void);

/* System information. */
typedef enum {
  HSA_ENDIANNESS_LITTLE = 0,
  HSA_ENDIANNESS_BIG = 1
} hsa_endianness_t;

typedef enum {
  HSA_MACHINE_MODEL_SMALL = 0,
  HSA_MACHINE_MODEL_LARGE = 1
} hsa_machine_model_t;

typedef enum {
  HSA_PROFILE_BASE = 0,
  HSA_PROFILE_FULL = 1
} hsa_profile_t;

typedef enum {
  HSA_SYSTEM_INFO_VERSION_MAJOR = 0,       /* uint16_t */
  HSA_SYSTEM_INFO_VERSION_MINOR = 1,       /* uint16_t */
  HSA_SYSTEM_INFO_TIMESTAMP = 2,           /* uint64_t */
  HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY = 3, /* uint64_t, Hz */
  HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT = 4,     /* uint64_t */
  HSA_SYSTEM_INFO_ENDIANNESS = 5,          /* hsa_endianness_t */
  HSA_SYSTEM_INFO_MACHINE_MODEL = 6        /* hsa_machine_model_t */
} hsa_system_info_t;

HSA_API hsa_status_t hsa_system_get_info(hsa_system_info_t attribute,
                                         void* value);

/* Extensions (ROCr's values). */
typedef enum {
  HSA_EXTENSION_FINALIZER = 0,
  HSA_EXTENSION_IMAGES = 1,
  HSA_EXTENSION_PERFORMANCE_COUNTERS = 2,
  HSA_EXTENSION_PROFILING_EVENTS = 3,
  HSA_EXTENSION_AMD_PROFILER = 0x200,
  HSA_EXTENSION_AMD_LOADER = 0x201,
  HSA_EXTENSION_AMD_AQLPROFILE = 0x202,
  HSA_EXTENSION_AMD_PC_SAMPLING = 0x203
} hsa_extension_t;

HSA_API hsa_status_t hsa_system_major_extension_supported(
    uint16_t extension, uint16_t version_major, uint16_t* version_minor,
    bool* result);
/* Copies min(table_length, size of the table) bytes of the extension's
 * function table for `version_major` into `table`. */
HSA_API hsa_status_t hsa_system_get_major_extension_table(uint16_t extension,
                                                          uint16_t version_major,
                                                          size_t table_length,
                                                          void* table);

/* Code objects and executables (handles only: the loader extension table
 * refers to them). */
typedef int hsa_file_t;
typedef struct hsa_executable_s {
  uint64_t handle;
} hsa_executable_t;
typedef struct hsa_code_object_reader_s {
  uint64_t handle;
} hsa_code_object_reader_t;

/* Agents. */
typedef struct hsa_agent_s {
  uint64_t handle;
} hsa_agent_t;

typedef enum {
  HSA_AGENT_FEATURE_KERNEL_DISPATCH = 1,
  HSA_AGENT_FEATURE_AGENT_DISPATCH = 2
} hsa_agent_feature_t;

typedef enum {
  HSA_DEVICE_TYPE_CPU = 0,
  HSA_DEVICE_TYPE_GPU = 1,
  HSA_DEVICE_TYPE_DSP = 2
} hsa_device_type_t;

typedef enum {
  HSA_AGENT_INFO_NAME = 0,           /* char[64] */
  HSA_AGENT_INFO_VENDOR_NAME = 1,    /* char[64] */
  HSA_AGENT_INFO_FEATURE = 2,        /* hsa_agent_feature_t */
  HSA_AGENT_INFO_MACHINE_MODEL = 3,  /* hsa_machine_model_t */
  HSA_AGENT_INFO_PROFILE = 4,        /* hsa_profile_t */
  HSA_AGENT_INFO_WAVEFRONT_SIZE = 6, /* uint32_t */
  HSA_AGENT_INFO_NODE = 16,          /* uint32_t */
  HSA_AGENT_INFO_DEVICE = 17         /* hsa_device_type_t */
} hsa_agent_info_t;

HSA_API hsa_status_t hsa_agent_get_info(hsa_agent_t agent,
                                        hsa_agent_info_t attribute,
                                        void* value);

HSA_API hsa_status_t hsa_iterate_agents(
    hsa_status_t (*callback)(hsa_agent_t agent, void* data), void* data);

/* Memory segments and permissions. */
typedef enum {
  HSA_REGION_SEGMENT_GLOBAL = 0,
  HSA_REGION_SEGMENT_READONLY = 1,
  HSA_REGION_SEGMENT_PRIVATE = 2,
  HSA_REGION_SEGMENT_GROUP = 3,
  HSA_REGION_SEGMENT_KERNARG = 4
} hsa_region_segment_t;

typedef enum {
  HSA_ACCESS_PERMISSION_NONE = 0,
  HSA_ACCESS_PERMISSION_RO = 1,
  HSA_ACCESS_PERMISSION_WO = 2,
  HSA_ACCESS_PERMISSION_RW = 3
} hsa_access_permission_t;

/* Signals. */
typedef struct hsa_signal_s {
  uint64_t handle;
} hsa_signal_t;

/* 64-bit value on 64-bit (large model) hosts. */
typedef int64_t hsa_signal_value_t;

typedef enum {
  HSA_SIGNAL_CONDITION_EQ = 0,
  HSA_SIGNAL_CONDITION_NE = 1,
  HSA_SIGNAL_CONDITION_LT = 2,
  HSA_SIGNAL_CONDITION_GTE = 3
} hsa_signal_condition_t;

typedef enum {
  HSA_WAIT_STATE_BLOCKED = 0,
  HSA_WAIT_STATE_ACTIVE = 1
} hsa_wait_state_t;

HSA_API hsa_status_t hsa_signal_create(hsa_signal_value_t initial_value,
                                       uint32_t num_consumers,
                                       const hsa_agent_t* consumers,
                                       hsa_signal_t* signal);
HSA_API hsa_status_t hsa_signal_destroy(hsa_signal_t signal);

HSA_API hsa_signal_value_t hsa_signal_load_scacquire(hsa_signal_t signal);
HSA_API hsa_signal_value_t hsa_signal_load_relaxed(hsa_signal_t signal);

HSA_API void hsa_signal_store_relaxed(hsa_signal_t signal,
                                      hsa_signal_value_t value);
HSA_API void hsa_signal_store_screlease(hsa_signal_t signal,
                                        hsa_signal_value_t value);
HSA_API void hsa_signal_silent_store_relaxed(hsa_signal_t signal,
                                             hsa_signal_value_t value);
HSA_API void hsa_signal_silent_store_screlease(hsa_signal_t signal,
                                               hsa_signal_value_t value);

/* Read-modify-write operations; one declaration per memory ordering. */
#define AMDGPU_DROPIN_HSA_SIGNAL_RMW_(op, order)                    \
  HSA_API hsa_signal_value_t hsa_signal_##op##_##order(             \
      hsa_signal_t signal, hsa_signal_value_t value);
#define AMDGPU_DROPIN_HSA_SIGNAL_VOID_(op, order)                   \
  HSA_API void hsa_signal_##op##_##order(hsa_signal_t signal,       \
                                         hsa_signal_value_t value);

AMDGPU_DROPIN_HSA_SIGNAL_RMW_(exchange, scacq_screl)
AMDGPU_DROPIN_HSA_SIGNAL_RMW_(exchange, scacquire)
AMDGPU_DROPIN_HSA_SIGNAL_RMW_(exchange, relaxed)
AMDGPU_DROPIN_HSA_SIGNAL_RMW_(exchange, screlease)

HSA_API hsa_signal_value_t hsa_signal_cas_scacq_screl(
    hsa_signal_t signal, hsa_signal_value_t expected, hsa_signal_value_t value);
HSA_API hsa_signal_value_t hsa_signal_cas_scacquire(
    hsa_signal_t signal, hsa_signal_value_t expected, hsa_signal_value_t value);
HSA_API hsa_signal_value_t hsa_signal_cas_relaxed(
    hsa_signal_t signal, hsa_signal_value_t expected, hsa_signal_value_t value);
HSA_API hsa_signal_value_t hsa_signal_cas_screlease(
    hsa_signal_t signal, hsa_signal_value_t expected, hsa_signal_value_t value);

AMDGPU_DROPIN_HSA_SIGNAL_VOID_(add, scacq_screl)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(add, scacquire)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(add, relaxed)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(add, screlease)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(subtract, scacq_screl)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(subtract, scacquire)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(subtract, relaxed)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(subtract, screlease)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(and, scacq_screl)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(and, scacquire)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(and, relaxed)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(and, screlease)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(or, scacq_screl)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(or, scacquire)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(or, relaxed)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(or, screlease)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(xor, scacq_screl)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(xor, scacquire)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(xor, relaxed)
AMDGPU_DROPIN_HSA_SIGNAL_VOID_(xor, screlease)

#undef AMDGPU_DROPIN_HSA_SIGNAL_RMW_
#undef AMDGPU_DROPIN_HSA_SIGNAL_VOID_

/* timeout_hint is in ticks of HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY. */
HSA_API hsa_signal_value_t hsa_signal_wait_scacquire(
    hsa_signal_t signal, hsa_signal_condition_t condition,
    hsa_signal_value_t compare_value, uint64_t timeout_hint,
    hsa_wait_state_t wait_state_hint);
HSA_API hsa_signal_value_t hsa_signal_wait_relaxed(
    hsa_signal_t signal, hsa_signal_condition_t condition,
    hsa_signal_value_t compare_value, uint64_t timeout_hint,
    hsa_wait_state_t wait_state_hint);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AMDGPU_DROPIN_TEST_HSA_H_ */

/*
 * The software HSA runtime as IREE's libhsa.c loads it, for one IREE table
 * layout (IREE_TEST_LIBHSA_LAYOUT) and one simulated GPU count:
 *
 *   1. dlopen("<dir>/libhsa-runtime64.so.1", RTLD_LAZY | RTLD_LOCAL), as
 *      IREE does with IREE_HAL_AMDGPU_LIBHSA_PATH=<dir>;
 *   2. every entry of the layout resolved by name with dlsym into an
 *      iree_hal_amdgpu_libhsa_t of that layout: each is a distinct function
 *      of this library carrying that name;
 *   3. hsa_init through the table, then
 *      hsa_system_get_major_extension_table(HSA_EXTENSION_AMD_LOADER, 1,
 *      sizeof(amd_loader), &amd_loader) through the table: the 7 loader
 *      functions, each answering its defined errors;
 *   4. the agent attributes IREE's topology reads: DEVICE for every agent;
 *      NEAREST_CPU (a CPU agent), VENDOR_NAME, NAME, CHIP_ID (equal across
 *      GPUs, so IREE groups them) and UUID ("GPU-" + 16 hex digits, unique,
 *      fitting IREE's char[32]) for every GPU; a GPU found again by its UUID
 *      as IREE's `GPU-...` device path does.
 *
 * Usage: hsa_sim_iree_libhsa <dir of libhsa-runtime64.so.1> <expected GPUs>
 * (the GPU count comes from $HSA_SIM_GPU_COUNT). Exit 0 pass, 1 failure.
 */
#define _GNU_SOURCE
#include "dropin_check.h"
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iree/hal/drivers/amdgpu/util/libhsa.h"

DROPIN_CHECK_DEFINE_FAILURES;


/* The entries of this layout, by name (the project's own copy of IREE's
 * table orders, ctest/include/iree/hal/drivers/amdgpu/util/libhsa.h). */
static const char* const kEntries[] = {
#define ENTRY_NAME(name) #name,
    IREE_TEST_LIBHSA_ENTRIES(ENTRY_NAME)
#undef ENTRY_NAME
};
#define ENTRY_COUNT (sizeof(kEntries) / sizeof(kEntries[0]))
_Static_assert(ENTRY_COUNT == IREE_TEST_LIBHSA_ENTRY_COUNT, "entry count");
_Static_assert(sizeof(hsa_ven_amd_loader_1_03_pfn_t) == 7 * sizeof(void*),
               "loader table v1.03 has 7 entries");

static const char* const kLoaderEntries[] = {
    "hsa_ven_amd_loader_query_host_address",
    "hsa_ven_amd_loader_query_segment_descriptors",
    "hsa_ven_amd_loader_query_executable",
    "hsa_ven_amd_loader_executable_iterate_loaded_code_objects",
    "hsa_ven_amd_loader_loaded_code_object_get_info",
    "hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size",
    "hsa_ven_amd_loader_iterate_executables",
};

static iree_hal_amdgpu_libhsa_t g_libhsa;

/* Calls the table's function `name` with its real signature (a function
 * pointer converts to another function pointer type in ISO C). */
#define CALL(name, ...) ((__typeof__(&name))g_libhsa.name)(__VA_ARGS__)

static bool resolve_table(void* library, const char* library_path) {
  memset(&g_libhsa, 0, sizeof(g_libhsa));
  void** slots = (void**)(void*)((char*)&g_libhsa + 16);
  for (size_t i = 0; i < ENTRY_COUNT; ++i) {
    void* symbol = dlsym(library, kEntries[i]);
    if (!symbol) {
      fprintf(stderr, "entry %zu %s: not exported\n", i, kEntries[i]);
      ++dropin_failures;
      continue;
    }
    slots[i] = symbol;
    Dl_info info;
    if (!dladdr(symbol, &info) || !info.dli_sname ||
        strcmp(info.dli_sname, kEntries[i]) != 0 || !info.dli_fname ||
        !strstr(info.dli_fname, "libhsa-runtime64.so.1")) {
      fprintf(stderr, "entry %s resolves to %s in %s, not %s\n", kEntries[i],
              info.dli_sname ? info.dli_sname : "?",
              info.dli_fname ? info.dli_fname : "?", library_path);
      ++dropin_failures;
    }
    for (size_t j = 0; j < i; ++j) {
      if (slots[j] == symbol) {
        fprintf(stderr, "%s and %s share an address\n", kEntries[i],
                kEntries[j]);
        ++dropin_failures;
      }
    }
  }
  /* The layout's pinned slots (docs/iree.md#layouts-shared-with-iree). */
  static const size_t kReserveSlot[] = {0, 32, 33, 34};
  DROPIN_CHECK((char*)&g_libhsa.hsa_amd_vmem_address_reserve_align -
            (char*)&g_libhsa ==
        (ptrdiff_t)(16 + 8 * kReserveSlot[IREE_TEST_LIBHSA_LAYOUT]));
  DROPIN_CHECK(offsetof(iree_hal_amdgpu_libhsa_t, amd_loader) ==
        16 + 8 * ENTRY_COUNT);
  return dropin_failures == 0;
}

static void check_extension_table(void* library) {
  /* As IREE: the whole v1.03 table into the struct's amd_loader. */
  memset(&g_libhsa.amd_loader, 0xAA, sizeof(g_libhsa.amd_loader));
  DROPIN_CHECK(CALL(hsa_system_get_major_extension_table, HSA_EXTENSION_AMD_LOADER, 1,
             sizeof(g_libhsa.amd_loader), &g_libhsa.amd_loader) ==
        HSA_STATUS_SUCCESS);
  void* entries[7];
  memcpy(entries, &g_libhsa.amd_loader, sizeof(entries));
  for (size_t i = 0; i < 7; ++i) {
    DROPIN_CHECK(entries[i] != NULL && entries[i] == dlsym(library, kLoaderEntries[i]));
  }
  /* A v1.00 caller gets 3 entries, nothing past them is written. */
  hsa_ven_amd_loader_1_03_pfn_t partial;
  memset(&partial, 0xAA, sizeof(partial));
  DROPIN_CHECK(CALL(hsa_system_get_major_extension_table, HSA_EXTENSION_AMD_LOADER, 1,
             3 * sizeof(void*), &partial) == HSA_STATUS_SUCCESS);
  DROPIN_CHECK(memcmp(&partial, &g_libhsa.amd_loader, 3 * sizeof(void*)) == 0);
  const unsigned char* tail = (const unsigned char*)&partial + 3 * sizeof(void*);
  for (size_t i = 0; i < 4 * sizeof(void*); ++i) DROPIN_CHECK(tail[i] == 0xAA);
  /* ROCr's errors. */
  DROPIN_CHECK(CALL(hsa_system_get_major_extension_table, HSA_EXTENSION_AMD_LOADER, 1,
             0, &partial) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(CALL(hsa_system_get_major_extension_table, HSA_EXTENSION_AMD_LOADER, 1,
             sizeof(partial), NULL) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(CALL(hsa_system_get_major_extension_table, HSA_EXTENSION_AMD_LOADER, 2,
             sizeof(partial), &partial) == HSA_STATUS_ERROR);
  DROPIN_CHECK(CALL(hsa_system_get_major_extension_table, HSA_EXTENSION_IMAGES, 1,
             sizeof(partial), &partial) == HSA_STATUS_ERROR);
  uint16_t minor = 99;
  bool supported = false;
  DROPIN_CHECK(CALL(hsa_system_major_extension_supported, HSA_EXTENSION_AMD_LOADER, 1,
             &minor, &supported) == HSA_STATUS_SUCCESS);
  DROPIN_CHECK(supported && minor == 0);
  DROPIN_CHECK(CALL(hsa_system_major_extension_supported, HSA_EXTENSION_AMD_LOADER, 2,
             &minor, &supported) == HSA_STATUS_SUCCESS);
  DROPIN_CHECK(!supported);
  DROPIN_CHECK(CALL(hsa_system_major_extension_supported, HSA_EXTENSION_AMD_LOADER, 1,
             NULL, &supported) == HSA_STATUS_ERROR_INVALID_ARGUMENT);

  /* Each loader function answers a defined HSA status: no code object is
   * loaded in this runtime. */
  const hsa_ven_amd_loader_1_03_pfn_t* loader = &g_libhsa.amd_loader;
  int local = 0;
  const void* host = NULL;
  DROPIN_CHECK(loader->hsa_ven_amd_loader_query_host_address(&local, &host) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(loader->hsa_ven_amd_loader_query_host_address(NULL, &host) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  size_t segments = 0;
  DROPIN_CHECK(loader->hsa_ven_amd_loader_query_segment_descriptors(NULL, &segments) ==
        HSA_STATUS_SUCCESS);
  DROPIN_CHECK(segments == 0);
  DROPIN_CHECK(loader->hsa_ven_amd_loader_query_segment_descriptors(NULL, NULL) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_ven_amd_loader_segment_descriptor_t descriptor;
  segments = 1;
  DROPIN_CHECK(loader->hsa_ven_amd_loader_query_segment_descriptors(
            &descriptor, &segments) == HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  hsa_executable_t executable = {0};
  DROPIN_CHECK(loader->hsa_ven_amd_loader_query_executable(&local, &executable) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(loader->hsa_ven_amd_loader_executable_iterate_loaded_code_objects(
            executable, NULL, NULL) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_loaded_code_object_t code_object = {42};
  uint64_t value = 0;
  DROPIN_CHECK(loader->hsa_ven_amd_loader_loaded_code_object_get_info(
            code_object, HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_BASE,
            &value) == HSA_STATUS_ERROR_INVALID_CODE_OBJECT);
  hsa_code_object_reader_t reader;
  DROPIN_CHECK(loader->hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size(
            -1, 0, 16, &reader) == HSA_STATUS_ERROR_INVALID_FILE);
  DROPIN_CHECK(loader->hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size(
            0, 0, 0, &reader) == HSA_STATUS_ERROR_INVALID_CODE_OBJECT);
  DROPIN_CHECK(loader->hsa_ven_amd_loader_iterate_executables(NULL, NULL) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

static hsa_status_t no_executable_expected(hsa_executable_t executable,
                                           void* data) {
  (void)executable;
  ++*(int*)data;
  return HSA_STATUS_SUCCESS;
}

typedef struct agents_t {
  size_t count;
  hsa_agent_t all[80];
} agents_t;

static hsa_status_t collect(hsa_agent_t agent, void* data) {
  agents_t* agents = data;
  if (agents->count == 80) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  agents->all[agents->count++] = agent;
  return HSA_STATUS_SUCCESS;
}

static bool is_uuid(const char* uuid) {
  if (strncmp(uuid, "GPU-", 4) != 0 || strlen(uuid) != 20) return false;
  for (size_t i = 4; i < 20; ++i) {
    if (!isxdigit((unsigned char)uuid[i]) || isupper((unsigned char)uuid[i])) {
      return false;
    }
  }
  return true;
}

static void check_topology_queries(size_t expected_gpus) {
  agents_t agents = {0};
  DROPIN_CHECK(CALL(hsa_iterate_agents, collect, &agents) == HSA_STATUS_SUCCESS);
  hsa_agent_t cpus[16], gpus[64];
  size_t cpu_count = 0, gpu_count = 0;
  for (size_t i = 0; i < agents.count; ++i) {
    hsa_device_type_t type = HSA_DEVICE_TYPE_DSP;
    DROPIN_CHECK(CALL(hsa_agent_get_info, agents.all[i], HSA_AGENT_INFO_DEVICE,
               &type) == HSA_STATUS_SUCCESS);
    if (type == HSA_DEVICE_TYPE_CPU && cpu_count < 16) cpus[cpu_count++] = agents.all[i];
    if (type == HSA_DEVICE_TYPE_GPU && gpu_count < 64) gpus[gpu_count++] = agents.all[i];
  }
  DROPIN_CHECK(cpu_count >= 1);
  DROPIN_CHECK(gpu_count == expected_gpus);
  char uuids[64][32];
  uint32_t chip_id_0 = 0;
  char vendor_0[64] = {0}, name_0[64] = {0};
  for (size_t g = 0; g < gpu_count; ++g) {
    /* NEAREST_CPU: one of the CPU agents. */
    hsa_agent_t nearest = {0};
    DROPIN_CHECK(CALL(hsa_agent_get_info, gpus[g],
               (hsa_agent_info_t)HSA_AMD_AGENT_INFO_NEAREST_CPU,
               &nearest) == HSA_STATUS_SUCCESS);
    bool found = false;
    for (size_t c = 0; c < cpu_count; ++c) found |= cpus[c].handle == nearest.handle;
    DROPIN_CHECK(found);
    /* Vendor, name and chip id: equal across GPUs (IREE's compatibility). */
    char vendor[64] = {0}, name[64] = {0};
    uint32_t chip_id = 0;
    DROPIN_CHECK(CALL(hsa_agent_get_info, gpus[g], HSA_AGENT_INFO_VENDOR_NAME,
               vendor) == HSA_STATUS_SUCCESS);
    DROPIN_CHECK(CALL(hsa_agent_get_info, gpus[g], HSA_AGENT_INFO_NAME, name) ==
          HSA_STATUS_SUCCESS);
    DROPIN_CHECK(CALL(hsa_agent_get_info, gpus[g],
               (hsa_agent_info_t)HSA_AMD_AGENT_INFO_CHIP_ID,
               &chip_id) == HSA_STATUS_SUCCESS);
    DROPIN_CHECK(chip_id != 0);
    if (g == 0) {
      chip_id_0 = chip_id;
      memcpy(vendor_0, vendor, sizeof(vendor));
      memcpy(name_0, name, sizeof(name));
    }
    DROPIN_CHECK(chip_id == chip_id_0 && strcmp(vendor, vendor_0) == 0 &&
          strcmp(name, name_0) == 0);
    /* UUID into IREE's char[32]: ROCr's format, unique. Bytes past the
     * string stay untouched. */
    memset(uuids[g], 0x5A, sizeof(uuids[g]));
    DROPIN_CHECK(CALL(hsa_agent_get_info, gpus[g],
               (hsa_agent_info_t)HSA_AMD_AGENT_INFO_UUID,
               uuids[g]) == HSA_STATUS_SUCCESS);
    DROPIN_CHECK(memchr(uuids[g], 0, sizeof(uuids[g])) != NULL);
    DROPIN_CHECK(is_uuid(uuids[g]));
    DROPIN_CHECK((unsigned char)uuids[g][21] == 0x5A);
    for (size_t h = 0; h < g; ++h) DROPIN_CHECK(strcmp(uuids[g], uuids[h]) != 0);
  }
  /* IREE's `GPU-...` device path: find each GPU again by its UUID (compared
   * case-insensitively, as IREE does). */
  for (size_t g = 0; g < gpu_count; ++g) {
    char wanted[32];
    snprintf(wanted, sizeof(wanted), "%s", uuids[g]);
    for (char* p = wanted + 4; *p; ++p) *p = (char)toupper((unsigned char)*p);
    size_t match = SIZE_MAX;
    for (size_t h = 0; h < gpu_count && match == SIZE_MAX; ++h) {
      char uuid[32];
      DROPIN_CHECK(CALL(hsa_agent_get_info, gpus[h],
                 (hsa_agent_info_t)HSA_AMD_AGENT_INFO_UUID,
                 uuid) == HSA_STATUS_SUCCESS);
      if (strcasecmp(uuid, wanted) == 0) match = h;
    }
    DROPIN_CHECK(match == g);
  }
  /* CPU agents answer as ROCr's: no UUID, no nearest CPU. */
  char cpu_uuid[32];
  DROPIN_CHECK(CALL(hsa_agent_get_info, cpus[0],
             (hsa_agent_info_t)HSA_AMD_AGENT_INFO_UUID,
             cpu_uuid) == HSA_STATUS_SUCCESS);
  DROPIN_CHECK(strcmp(cpu_uuid, "CPU-XX") == 0);
  hsa_agent_t none = {1};
  DROPIN_CHECK(CALL(hsa_agent_get_info, cpus[0],
             (hsa_agent_info_t)HSA_AMD_AGENT_INFO_NEAREST_CPU,
             &none) == HSA_STATUS_SUCCESS);
  DROPIN_CHECK(none.handle == 0);
  int visited = 0;
  DROPIN_CHECK(g_libhsa.amd_loader.hsa_ven_amd_loader_iterate_executables(
            no_executable_expected, &visited) == HSA_STATUS_SUCCESS);
  DROPIN_CHECK(visited == 0);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <dir of libhsa-runtime64.so.1> <GPUs>\n", argv[0]);
    return 1;
  }
  size_t expected_gpus = (size_t)strtoul(argv[2], NULL, 10);
  char path[4096];
  snprintf(path, sizeof(path), "%s/libhsa-runtime64.so.1", argv[1]);
  void* library = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
  if (!library) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return 1;
  }
  if (!resolve_table(library, path)) return 1;
  /* Before hsa_init the extension query is refused, as ROCr's. */
  hsa_ven_amd_loader_1_03_pfn_t early;
  DROPIN_CHECK(CALL(hsa_system_get_major_extension_table, HSA_EXTENSION_AMD_LOADER, 1,
             sizeof(early), &early) == HSA_STATUS_ERROR_NOT_INITIALIZED);
  DROPIN_CHECK(CALL(hsa_init) == HSA_STATUS_SUCCESS);
  g_libhsa.initialized = true;
  check_extension_table(library);
  check_topology_queries(expected_gpus);
  uint16_t major = 0;
  DROPIN_CHECK(CALL(hsa_system_get_info, HSA_SYSTEM_INFO_VERSION_MAJOR, &major) ==
        HSA_STATUS_SUCCESS);
  DROPIN_CHECK(major != 0);
  DROPIN_CHECK(CALL(hsa_shut_down) == HSA_STATUS_SUCCESS);
  /* After the last shutdown the loader functions are refused again. */
  size_t segments = 0;
  DROPIN_CHECK(g_libhsa.amd_loader.hsa_ven_amd_loader_query_segment_descriptors(
            NULL, &segments) == HSA_STATUS_ERROR_NOT_INITIALIZED);
  dlclose(library);
  if (dropin_failures) {
    fprintf(stderr, "%d check(s) failed\n", dropin_failures);
    return 1;
  }
  printf("layout %d, %zu GPU(s): %zu entries resolved, loader table and "
         "topology attributes OK\n",
         IREE_TEST_LIBHSA_LAYOUT, expected_gpus, ENTRY_COUNT);
  return 0;
}

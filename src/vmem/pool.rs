//! Memory pool lookup: the first pool of an agent that is in the GLOBAL
//! segment, allows runtime allocation and has any of the wanted global flags.

use hsa_sys::*;

use super::libhsa_table::VmemApi;
use crate::status::{Error, Result, StatusCode};

/// The flags `find_coarse` looks for.
pub const COARSE_FLAGS: hsa_amd_memory_pool_global_flag_t = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
/// The flags `find_fine` looks for (either kind of fine-grained memory).
pub const FINE_FLAGS: hsa_amd_memory_pool_global_flag_t = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED
    | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED;

fn info_u32(
    api: &dyn VmemApi,
    pool: hsa_amd_memory_pool_t,
    attribute: hsa_amd_memory_pool_info_t,
) -> Option<u32> {
    let (status, bytes) = api.pool_get_info(pool, attribute);
    (status == HSA_STATUS_SUCCESS).then(|| u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

fn info_bool(
    api: &dyn VmemApi,
    pool: hsa_amd_memory_pool_t,
    attribute: hsa_amd_memory_pool_info_t,
) -> Option<bool> {
    let (status, bytes) = api.pool_get_info(pool, attribute);
    // A C `bool` is one byte; any non-zero byte reads as true.
    (status == HSA_STATUS_SUCCESS).then_some(bytes[0] != 0)
}

/// Whether `pool` qualifies. A pool whose attributes cannot be read is
/// skipped (upstream ignored the query errors and judged the pool on
/// zero-initialized values, which reads a failed SEGMENT query as GLOBAL).
fn pool_matches(
    api: &dyn VmemApi,
    pool: hsa_amd_memory_pool_t,
    flags: hsa_amd_memory_pool_global_flag_t,
) -> bool {
    if info_u32(api, pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT) != Some(HSA_REGION_SEGMENT_GLOBAL) {
        return false;
    }
    if info_bool(api, pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED) != Some(true) {
        return false;
    }
    matches!(info_u32(api, pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS), Some(f) if f & flags != 0)
}

/// Finds the first pool of `agent` matching any of `flags` (upstream's rules;
/// a zero pool handle counts as not found, as upstream).
pub fn find_global_memory_pool(
    api: &dyn VmemApi,
    agent: hsa_agent_t,
    flags: hsa_amd_memory_pool_global_flag_t,
) -> Result<hsa_amd_memory_pool_t> {
    let mut best = hsa_amd_memory_pool_t::default();
    let status = api.iterate_pools(agent, &mut |pool| {
        if pool_matches(api, pool, flags) {
            best = pool;
            HSA_STATUS_INFO_BREAK
        } else {
            HSA_STATUS_SUCCESS
        }
    });
    if status != HSA_STATUS_SUCCESS && status != HSA_STATUS_INFO_BREAK {
        return Err(Error::from_hsa(
            "hsa_amd_agent_iterate_memory_pools",
            status,
            &format!("iterating the memory pools of agent {:#x}", agent.handle),
        ));
    }
    if best.handle == 0 {
        return Err(Error::new(
            StatusCode::NotFound,
            format!("no memory pool matching the required flags {flags}"),
        ));
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vmem::fake::{FakeHsa, FakePool};

    fn pool(segment: u32, flags: u32, alloc: bool) -> FakePool {
        FakePool { segment, flags, alloc_allowed: alloc, granule: 4096 }
    }

    #[test]
    fn first_match_wins_and_rules_apply() {
        let hsa = FakeHsa::with_pools(vec![
            pool(HSA_REGION_SEGMENT_GROUP, COARSE_FLAGS, true), // not GLOBAL
            pool(HSA_REGION_SEGMENT_GLOBAL, COARSE_FLAGS, false), // not allocatable
            pool(HSA_REGION_SEGMENT_GLOBAL, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT, true),
            pool(
                HSA_REGION_SEGMENT_GLOBAL,
                COARSE_FLAGS | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT,
                true,
            ),
            pool(HSA_REGION_SEGMENT_GLOBAL, COARSE_FLAGS, true),
            pool(
                HSA_REGION_SEGMENT_GLOBAL,
                HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED,
                true,
            ),
        ]);
        let agent = hsa_agent_t { handle: 7 };
        assert_eq!(find_global_memory_pool(&hsa, agent, COARSE_FLAGS).unwrap(), FakeHsa::pool_handle(3));
        assert_eq!(find_global_memory_pool(&hsa, agent, FINE_FLAGS).unwrap(), FakeHsa::pool_handle(5));
        let err = find_global_memory_pool(&hsa, agent, 0).unwrap_err();
        assert_eq!(err.code, StatusCode::NotFound);
        assert_eq!(err.message, "no memory pool matching the required flags 0");
    }

    #[test]
    fn iteration_errors_map_and_query_errors_skip_the_pool() {
        let hsa = FakeHsa::with_pools(vec![pool(HSA_REGION_SEGMENT_GLOBAL, COARSE_FLAGS, true)]);
        hsa.fail_nth("hsa_amd_agent_iterate_memory_pools", 1, HSA_STATUS_ERROR_INVALID_AGENT);
        let err = find_global_memory_pool(&hsa, hsa_agent_t { handle: 1 }, COARSE_FLAGS).unwrap_err();
        assert_eq!(err.code, StatusCode::InvalidArgument);
        assert!(err
            .message
            .starts_with("[hsa_amd_agent_iterate_memory_pools] HSA_STATUS_ERROR_INVALID_AGENT"));
        // A failing SEGMENT query skips the pool (→ NOT_FOUND here).
        hsa.fail_nth("hsa_amd_memory_pool_get_info", 1, HSA_STATUS_ERROR);
        let err = find_global_memory_pool(&hsa, hsa_agent_t { handle: 1 }, COARSE_FLAGS).unwrap_err();
        assert_eq!(err.code, StatusCode::NotFound);
    }
}

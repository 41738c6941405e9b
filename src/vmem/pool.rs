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

/// The pool attributes the lookup reads, in upstream's order.
const QUERIES: [(hsa_amd_memory_pool_info_t, &str); 3] = [
    (HSA_AMD_MEMORY_POOL_INFO_SEGMENT, "SEGMENT"),
    (HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, "RUNTIME_ALLOC_ALLOWED"),
    (HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, "GLOBAL_FLAGS"),
];

/// A pool attribute query that failed, for the error message.
struct FailedQuery {
    pool: hsa_amd_memory_pool_t,
    attribute: &'static str,
}

/// The iterator body of upstream's lookup for one pool: SUCCESS to go on,
/// INFO_BREAK when `pool` matches, or the status of the first attribute query
/// that failed (which stops the iteration, as upstream).
fn visit_pool(
    api: &dyn VmemApi,
    pool: hsa_amd_memory_pool_t,
    flags: hsa_amd_memory_pool_global_flag_t,
    failed: &mut Option<FailedQuery>,
) -> hsa_status_t {
    for (attribute, attribute_name) in QUERIES {
        let (status, bytes) = api.pool_get_info(pool, attribute);
        if status != HSA_STATUS_SUCCESS {
            *failed = Some(FailedQuery { pool, attribute: attribute_name });
            return status;
        }
        let value = if attribute == HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED {
            // A C `bool` is one byte; any non-zero byte reads as true.
            u32::from(bytes[0] != 0)
        } else {
            u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
        };
        let keep_going = match attribute {
            HSA_AMD_MEMORY_POOL_INFO_SEGMENT => value == HSA_REGION_SEGMENT_GLOBAL,
            HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED => value != 0,
            _ => value & flags != 0,
        };
        if !keep_going {
            return HSA_STATUS_SUCCESS;
        }
    }
    HSA_STATUS_INFO_BREAK
}

/// Finds the first pool of `agent` that is GLOBAL, allows runtime allocation
/// and has any of `flags` (upstream's rules; a zero pool handle counts as not
/// found, as upstream). A failing attribute query stops the search: its HSA
/// status is the result, reported as the iteration's, as upstream does.
pub fn find_global_memory_pool(
    api: &dyn VmemApi,
    agent: hsa_agent_t,
    flags: hsa_amd_memory_pool_global_flag_t,
) -> Result<hsa_amd_memory_pool_t> {
    let mut best = hsa_amd_memory_pool_t::default();
    let mut failed = None;
    let status = api.iterate_pools(agent, &mut |pool| {
        let status = visit_pool(api, pool, flags, &mut failed);
        if status == HSA_STATUS_INFO_BREAK && failed.is_none() {
            best = pool;
        }
        status
    });
    if status != HSA_STATUS_SUCCESS && status != HSA_STATUS_INFO_BREAK {
        let details = match &failed {
            Some(query) => format!(
                "hsa_amd_memory_pool_get_info({}) of memory pool {:#x} of agent {:#x} failed",
                query.attribute, query.pool.handle, agent.handle
            ),
            None => format!("iterating the memory pools of agent {:#x}", agent.handle),
        };
        return Err(Error::from_hsa("hsa_amd_agent_iterate_memory_pools", status, &details));
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
    fn iteration_errors_map() {
        let hsa = FakeHsa::with_pools(vec![pool(HSA_REGION_SEGMENT_GLOBAL, COARSE_FLAGS, true)]);
        hsa.fail_nth("hsa_amd_agent_iterate_memory_pools", 1, HSA_STATUS_ERROR_INVALID_AGENT);
        let err = find_global_memory_pool(&hsa, hsa_agent_t { handle: 1 }, COARSE_FLAGS).unwrap_err();
        assert_eq!(err.code, StatusCode::InvalidArgument);
        assert_eq!(
            err.message,
            "[hsa_amd_agent_iterate_memory_pools] HSA_STATUS_ERROR_INVALID_AGENT: \
             iterating the memory pools of agent 0x1"
        );
    }

    /// Each of the three queries failing, on the first pool or on a later
    /// one after a non-matching pool: the iteration stops at once with that
    /// status (upstream HEAD), even when a later pool would match.
    #[test]
    fn query_errors_stop_the_search_with_their_status() {
        let pools = vec![
            pool(HSA_REGION_SEGMENT_GLOBAL, FINE_FLAGS, true), // fully queried, no match
            pool(HSA_REGION_SEGMENT_GLOBAL, COARSE_FLAGS, true),
            pool(HSA_REGION_SEGMENT_GLOBAL, COARSE_FLAGS, true),
        ];
        let cases = [
            (HSA_STATUS_ERROR_NOT_INITIALIZED, StatusCode::FailedPrecondition),
            (HSA_STATUS_ERROR_INVALID_ARGUMENT, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR, StatusCode::Unknown),
        ];
        for (first_pool, skip) in [(true, 0), (false, 3)] {
            for (index, name) in ["SEGMENT", "RUNTIME_ALLOC_ALLOWED", "GLOBAL_FLAGS"].iter().enumerate() {
                for (hsa_status, code) in cases {
                    let hsa = FakeHsa::with_pools(pools.clone());
                    hsa.fail_nth("hsa_amd_memory_pool_get_info", skip + index + 1, hsa_status);
                    let err =
                        find_global_memory_pool(&hsa, hsa_agent_t { handle: 9 }, COARSE_FLAGS).unwrap_err();
                    assert_eq!(err.code, code, "{name} {hsa_status:#x}");
                    let failed_pool = FakeHsa::pool_handle(if first_pool { 0 } else { 1 }).handle;
                    assert_eq!(
                        err.message,
                        format!(
                            "[hsa_amd_agent_iterate_memory_pools] {}: \
                             hsa_amd_memory_pool_get_info({name}) of memory pool {failed_pool:#x} \
                             of agent 0x9 failed",
                            hsa_status_name(hsa_status).unwrap()
                        )
                    );
                    // Nothing was queried after the failure.
                    assert_eq!(hsa.count("hsa_amd_memory_pool_get_info"), skip + index + 1);
                }
            }
        }
    }

    /// A query answering INFO_BREAK stops the iteration like a match would,
    /// but without a pool: NOT_FOUND, as upstream.
    #[test]
    fn query_info_break_is_not_found() {
        let hsa = FakeHsa::with_pools(vec![pool(HSA_REGION_SEGMENT_GLOBAL, COARSE_FLAGS, true)]);
        hsa.fail_nth("hsa_amd_memory_pool_get_info", 1, HSA_STATUS_INFO_BREAK);
        let err = find_global_memory_pool(&hsa, hsa_agent_t { handle: 1 }, COARSE_FLAGS).unwrap_err();
        assert_eq!(err.code, StatusCode::NotFound);
    }
}

//! Access descriptors for a ringbuffer from a topology and an access mode.

use hsa_sys::*;

use super::abi::{
    iree_hal_amdgpu_topology_t, AccessMode, TOPOLOGY_MAX_AGENT_COUNT, TOPOLOGY_MAX_CPU_AGENT_COUNT,
    TOPOLOGY_MAX_GPU_AGENT_COUNT,
};
use crate::status::{Error, Result};

/// Rejects a topology whose counts exceed their arrays (upstream would read
/// past `all_agents` and overflow its stack scratch).
pub fn validate(topology: &iree_hal_amdgpu_topology_t) -> Result<()> {
    let checks = [
        ("all_agent_count", topology.all_agent_count, TOPOLOGY_MAX_AGENT_COUNT),
        ("cpu_agent_count", topology.cpu_agent_count, TOPOLOGY_MAX_CPU_AGENT_COUNT),
        ("gpu_agent_count", topology.gpu_agent_count, TOPOLOGY_MAX_GPU_AGENT_COUNT),
    ];
    for (name, count, capacity) in checks {
        if count > capacity {
            return Err(Error::invalid_argument(format!(
                "topology {name} {count} exceeds its capacity of {capacity} agents"
            )));
        }
    }
    Ok(())
}

/// The descriptors upstream builds for `mode` (never NONE: passing NONE makes
/// HSA track the agent, NONE only revokes earlier access):
/// * SHARED: every topology agent RW;
/// * EXCLUSIVE: the local agent RW only (whether or not it is in the topology);
/// * EXCLUSIVE_CONSUMER: the local agent RO, every other agent WO;
/// * EXCLUSIVE_PRODUCER: the local agent WO, every other agent RO.
///
/// `topology` must have passed `validate`.
pub fn access_descriptors(
    topology: &iree_hal_amdgpu_topology_t,
    local_agent: hsa_agent_t,
    mode: AccessMode,
) -> Vec<hsa_amd_memory_access_desc_t> {
    let agents = &topology.all_agents[..topology.all_agent_count.min(TOPOLOGY_MAX_AGENT_COUNT)];
    let desc =
        |agent: hsa_agent_t, permissions| hsa_amd_memory_access_desc_t { permissions, agent_handle: agent };
    let per_agent = |local, other| {
        agents
            .iter()
            .map(|agent| desc(*agent, if agent.handle == local_agent.handle { local } else { other }))
            .collect()
    };
    match mode {
        AccessMode::IREE_HAL_AMDGPU_ACCESS_MODE_SHARED => {
            per_agent(HSA_ACCESS_PERMISSION_RW, HSA_ACCESS_PERMISSION_RW)
        }
        AccessMode::IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE => {
            vec![desc(local_agent, HSA_ACCESS_PERMISSION_RW)]
        }
        AccessMode::IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_CONSUMER => {
            per_agent(HSA_ACCESS_PERMISSION_RO, HSA_ACCESS_PERMISSION_WO)
        }
        AccessMode::IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_PRODUCER => {
            per_agent(HSA_ACCESS_PERMISSION_WO, HSA_ACCESS_PERMISSION_RO)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::StatusCode;

    fn topology(agents: &[u64]) -> Box<iree_hal_amdgpu_topology_t> {
        // SAFETY: the topology is plain integers; all-zero is a valid value.
        let mut t: Box<iree_hal_amdgpu_topology_t> = Box::new(unsafe { core::mem::zeroed() });
        t.all_agent_count = agents.len();
        for (i, a) in agents.iter().enumerate() {
            t.all_agents[i] = hsa_agent_t { handle: *a };
        }
        t
    }

    fn perms(descs: &[hsa_amd_memory_access_desc_t]) -> Vec<(u64, u32)> {
        descs.iter().map(|d| (d.agent_handle.handle, d.permissions)).collect()
    }

    #[test]
    fn descriptors_per_mode() {
        let t = topology(&[10, 20, 30]);
        let local = hsa_agent_t { handle: 20 };
        let (rw, ro, wo) = (HSA_ACCESS_PERMISSION_RW, HSA_ACCESS_PERMISSION_RO, HSA_ACCESS_PERMISSION_WO);
        use crate::vmem::abi::iree_hal_amdgpu_vmem_access_mode_e::*;
        assert_eq!(
            perms(&access_descriptors(&t, local, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED)),
            vec![(10, rw), (20, rw), (30, rw)]
        );
        assert_eq!(
            perms(&access_descriptors(&t, local, IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE)),
            vec![(20, rw)]
        );
        assert_eq!(
            perms(&access_descriptors(&t, local, IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_CONSUMER)),
            vec![(10, wo), (20, ro), (30, wo)]
        );
        assert_eq!(
            perms(&access_descriptors(&t, local, IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_PRODUCER)),
            vec![(10, ro), (20, wo), (30, ro)]
        );
        // A local agent outside the topology gets nothing in the per-agent modes.
        let outsider = hsa_agent_t { handle: 99 };
        assert_eq!(
            perms(&access_descriptors(&t, outsider, IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_CONSUMER)),
            vec![(10, wo), (20, wo), (30, wo)]
        );
        assert_eq!(
            perms(&access_descriptors(&t, outsider, IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE)),
            vec![(99, rw)]
        );
    }

    #[test]
    fn counts_above_capacity_are_rejected() {
        let mut t = topology(&[1]);
        assert!(validate(&t).is_ok());
        t.all_agent_count = TOPOLOGY_MAX_AGENT_COUNT;
        assert!(validate(&t).is_ok());
        t.all_agent_count = TOPOLOGY_MAX_AGENT_COUNT + 1;
        let err = validate(&t).unwrap_err();
        assert_eq!(err.code, StatusCode::InvalidArgument);
        assert!(err.message.contains("all_agent_count 129"), "{}", err.message);
        t.all_agent_count = 1;
        t.cpu_agent_count = 65;
        assert!(validate(&t).unwrap_err().message.contains("cpu_agent_count"));
        t.cpu_agent_count = 0;
        t.gpu_agent_count = usize::MAX;
        assert!(validate(&t).unwrap_err().message.contains("gpu_agent_count"));
    }
}

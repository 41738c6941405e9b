// Stands for ROCclr's own device/devhostcall.cpp in the consumer test's
// rocclr target: amdgpu_dropin_replace_rocclr_hostcall must have taken it out.
#error "ROCclr's own devhostcall.cpp was compiled: amdgpu_dropin_replace_rocclr_hostcall did not replace it"

/** runtime/: the warm container pool (claims and leases, warm-up, fair queue, engine link, recovery), its image, and workspace volumes. */
export { ContainerPool } from './pool.js'
export { defaultPoolName, type PooledContainer, type Lease, type ClaimRequest, type PoolOptions, type Priority } from './pool-options.js'
export { workspaceVolumeName, createWorkspaceVolume, recoverVolumes, type VolumeOwner } from './volumes.js'

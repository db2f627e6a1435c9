/** runtime/: what sits on the runtime port — the warm container pool (claims and leases, warm-up, fair queue, engine link, recovery), its image, workspace volumes and disks, and what every adapter shares (bytes, errors, one exec lifecycle, file operations). */
export { ContainerPool } from './pool.js'
export {
  defaultPoolName,
  type PooledContainer,
  type Lease,
  type ClaimRequest,
  type PoolOptions,
  type Priority,
} from './pool-options.js'
export { workspaceVolumeName, createWorkspaceVolume, recoverVolumes, type VolumeOwner } from './volumes.js'
export { byteChannel, collectExec, toByteChunks, toWebStream, type ByteChannel } from './bytes.js'
export {
  ContainerError,
  FilePathError,
  isContainerError,
  isFilePathError,
  type ContainerFailure,
  type FilePathProblem,
} from './errors.js'
export { defineRuntime } from './define.js'
export {
  DISK_LABEL,
  isDiskName,
  releaseDisk,
  releaseUnusedDisk,
  tidyOldDisks,
  workspaceDisks,
  type Disk,
  type DiskOptions,
  type WorkspaceDisks,
} from './disks.js'
export { sweepOrphanDisks, type DiskSweepOptions } from './disk-sweep.js'
export { pruneDeployment, type PruneItem, type PruneOptions, type PruneReport } from './prune.js'
export {
  abortedExec,
  execLifecycle,
  type ExecHooks,
  type ExecLifecycle,
  type ExecOutcome,
  type StdinSink,
} from './exec.js'
export { MAX_ENTRIES, execFileOperations, relativePath, type FileOperations, type FileOperationsBase } from './files.js'

/** workspaces/: a task's lasting place — workspace records, their files, snapshots, and the transcript store (event log). */
export { WorkspacesService, type WorkspaceRecord } from './workspaces.js'
export { EventLog, type EventLogOptions, type NewEvent } from './event-log.js'
export {
  WorkspaceFilesService,
  type FileListing,
  type UploadResult,
  type WorkspaceFilesOptions,
} from './workspace-files.js'
export { workspacePath } from './workspace-paths.js'
export { adoptRunningWorkspaces } from './adopt.js'
export { WorkspaceSnapshots, type WorkspaceSnapshotsOptions } from './workspace-snapshots.js'

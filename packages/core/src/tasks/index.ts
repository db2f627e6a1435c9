// tasks/: a prompt from submit to result — the queue and its scheduler, session containers, the runner session and its protocol, conversations, restart recovery, redaction.
export { TasksService, type TasksOptions, type Submitted } from './service.js'
export type { TaskRecord } from './record.js'
export type { TaskEngine } from './engine.js'
export { EventBus, type TaskBusMessage } from './event-bus.js'
export { nextQueued, type QueuedTask } from './scheduler.js'
export { materialize, eventsFile, WORKSPACE_DIR, type MaterializeDeps, type TaskSpec } from './materialize.js'
export { WarmAgents, warmKey, type WarmAgent, type WarmAgentsOptions, type AgentOutput } from './warm-agents.js'
export { redactAll } from './runner-session.js'

/** playbooks/: saved prompts run on demand, by webhook or on a schedule, and the record of each run. */
export { DEFAULT_SCHEDULE_LIMITS, PlaybooksService, webhookPath, type ScheduleLimits } from './playbooks.js'
export type { PlaybookRecord } from './record.js'
export { PlaybookRunsService, runPrompt, type RunRecord, type PlaybookRunsOptions } from './playbook-runs.js'
export { WebhookTrigger, type WebhookTriggerOptions } from './webhook-trigger.js'
export {
  PlaybookScheduler,
  type PlaybookSchedulerOptions,
  type SchedulerTimers,
} from './scheduler.js'
export { dueSlot, MAX_SCHEDULE_MIN_INTERVAL_S, nextRuns, parseSchedule, shortestIntervalS } from './schedule.js'

/** playbooks/: saved prompts run on demand, by webhook or on a schedule, and the record of each run. */
export { PlaybooksService, webhookPath } from './playbooks.js'
export type { PlaybookRecord } from './record.js'
export { PlaybookRunsService, runPrompt, type RunRecord, type PlaybookRunsOptions } from './playbook-runs.js'
export { WebhookTrigger, type WebhookTriggerOptions } from './webhook-trigger.js'
export {
  PlaybookScheduler,
  type PlaybookSchedulerOptions,
  type SchedulerTimers,
} from './scheduler.js'
export { dueSlot, nextRuns, parseSchedule } from './schedule.js'

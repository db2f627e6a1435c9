/** playbooks/: saved prompts run on demand or by webhook, and the record of each run. */
export { PlaybooksService, webhookPath } from './playbooks.js'
export type { PlaybookRecord } from './record.js'
export { PlaybookRunsService, runPrompt, type RunRecord, type PlaybookRunsOptions } from './playbook-runs.js'
export { WebhookTrigger, type WebhookTriggerOptions } from './webhook-trigger.js'

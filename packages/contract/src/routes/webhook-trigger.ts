import * as v from 'valibot'
import { maxLength } from '../schemas/length.js'
import { defineRoute } from '../route.js'
import { Id } from '../schemas/common.js'
import { PlaybookStarted } from '../schemas/playbook.js'

export const playbookWebhookTrigger = defineRoute({
  name: 'playbooks.trigger',
  method: 'POST',
  path: '/api/playbooks/:id/webhook/:secret',
  auth: 'public',
  tag: 'playbooks',
  summary: 'Start a run of a webhook playbook (the secret in the URL is the credential)',
  description:
    "No authentication header: the secret in the path is the credential. An unknown playbook, a wrong secret and a playbook whose `trigger_type` is not `webhook` all answer the same 404. A JSON body (any JSON value, up to 64 KiB) is appended to the run's prompt in a fenced block. Each playbook has its own rate limit (429 with `Retry-After`).",
  params: v.object({ id: Id('playbook'), secret: v.pipe(v.string(), maxLength(512)) }),
  secretParams: ['secret'],
  rawBody: "Any JSON value, up to 64 KiB, appended to the run's prompt (optional).",
  response: PlaybookStarted,
  status: 202,
  errors: ['RATE_LIMITED', 'PAYLOAD_TOO_LARGE'],
})

import * as v from 'valibot'
import { defineRoute } from '../route.js'
import { IdParams, ListOf, PageQuery } from '../schemas/common.js'
import {
  CreatePlaybook,
  Playbook,
  PlaybookRun,
  PlaybookRunsQuery,
  PlaybookStarted,
  PlaybookWebhookSecret,
  UpdatePlaybook,
} from '../schemas/playbook.js'

const params = IdParams('playbook')

export const playbookRoutes = [
  defineRoute({
    name: 'profiles.playbooks',
    method: 'GET',
    path: '/v1/profiles/:id/playbooks',
    auth: 'caller',
    tag: 'playbooks',
    summary: "List a profile's playbooks",
    params: IdParams('profile'),
    query: v.object(PageQuery),
    response: ListOf('playbooks', Playbook),
  }),
  defineRoute({
    name: 'playbooks.create',
    method: 'POST',
    path: '/v1/playbooks',
    auth: 'caller',
    tag: 'playbooks',
    summary: 'Create a playbook',
    description:
      'A playbook belongs to one of your profiles (`profile_id`) and runs `prompt` as a task of it, with the optional limits `max_turns`, `max_budget_usd` and `allowed_tools`. With `trigger_type: "webhook"` the answer carries `webhook_secret` (this once): `POST /api/playbooks/:id/webhook/:secret` then starts a run with the posted JSON body as context. With `trigger_type: "schedule"`, `schedule: { cron, timezone, missed }` (required then, refused otherwise) starts a run at each slot of the cron expression (5 fields, or 6 with seconds) in the IANA `timezone` (default `UTC`), exactly once across instances; a slot that passed while no instance could run it is skipped (`missed: "skip"`, the default) or run once at start (`"run_once"`). `enabled: false` pauses the schedule and the webhook. The server sets the least time between two runs of a schedule (one minute by default): a `cron` whose closest runs are nearer is a 400 naming `schedule.cron`. It also caps the active (enabled) scheduled playbooks of one caller (20 by default): one more is a 409 `CONFLICT` with `details.limit` and `details.active`.',
    body: CreatePlaybook,
    response: Playbook,
    status: 201,
    errors: ['CONFLICT'],
  }),
  defineRoute({
    name: 'playbooks.get',
    method: 'GET',
    path: '/v1/playbooks/:id',
    auth: 'caller',
    tag: 'playbooks',
    summary: 'Read one playbook',
    params,
    response: Playbook,
  }),
  defineRoute({
    name: 'playbooks.update',
    method: 'PATCH',
    path: '/v1/playbooks/:id',
    auth: 'caller',
    tag: 'playbooks',
    summary: 'Update a playbook',
    description:
      '`null` clears a limit. Switching to `trigger_type: "webhook"` without a secret yet generates one: it is in this answer only. Switching away from `schedule` clears the schedule; a new `schedule`, or enabling again, counts slots from now on. A schedule is held to the server\'s least interval between runs (400 naming `schedule.cron`), and making a playbook an active schedule to the cap on active schedules per caller (409 `CONFLICT`), as on create.',
    params,
    body: UpdatePlaybook,
    response: Playbook,
    errors: ['CONFLICT'],
  }),
  defineRoute({
    name: 'playbooks.delete',
    method: 'DELETE',
    path: '/v1/playbooks/:id',
    auth: 'caller',
    tag: 'playbooks',
    summary: 'Delete a playbook and its run history',
    description: 'A run under way finishes; its workspace stays until you delete it.',
    params,
    status: 204,
  }),
  defineRoute({
    name: 'playbooks.run',
    method: 'POST',
    path: '/v1/playbooks/:id/run',
    auth: 'caller',
    tag: 'playbooks',
    summary: 'Start a run now',
    description:
      'Every call starts a separate run (deduplicate on your side if you need exactly one). The run executes as a task in a new `pb-…` session workspace, which the workspace list leaves out. A task that cannot start (e.g. the profile is at its concurrency limit) still makes a run: a failed one, with the reason in `error`. Follow it with `GET /v1/playbooks/:id/runs`.',
    params,
    response: PlaybookStarted,
    status: 202,
  }),
  defineRoute({
    name: 'playbooks.runs',
    method: 'GET',
    path: '/v1/playbooks/:id/runs',
    auth: 'caller',
    tag: 'playbooks',
    summary: "A playbook's runs, newest first",
    description:
      "Each run: `status` (its task's), `trigger`, `task_id`, `workspace_id`, `session_id`, `created_at`, `started_at`, `finished_at` and `error`.",
    params,
    query: PlaybookRunsQuery,
    response: ListOf('runs', PlaybookRun),
  }),
  defineRoute({
    name: 'playbooks.rotateWebhookSecret',
    method: 'POST',
    path: '/v1/playbooks/:id/webhook-secret',
    auth: 'caller',
    tag: 'playbooks',
    summary: 'Generate a new webhook secret',
    description:
      'The new secret is in this answer only (Berth keeps its hash); the previous one stops working at once. The webhook answers only while `trigger_type` is `webhook`.',
    params,
    response: PlaybookWebhookSecret,
  }),
] as const

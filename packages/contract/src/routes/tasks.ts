import { defineRoute } from '../route.js'
import { IdParams, ListOf } from '../schemas/common.js'
import { EventsQuery, SubmitTask, SubmittedTask, Task, TaskListQuery, TranscriptEvent } from '../schemas/task.js'

export const taskRoutes = [
  defineRoute({
    name: 'tasks.submit',
    method: 'POST',
    path: '/v1/tasks',
    auth: 'caller',
    tag: 'tasks',
    summary: 'Submit a task',
    description:
      '`batch`: a fresh workspace and container, reaped when the task ends; poll `GET /v1/tasks/:id` (at most once a second) or subscribe over the WebSocket. `session`: without `session_id` starts a session, with it continues one in its warm container. A submit that would start one more running workspace than the profile allows answers 429 CONCURRENCY_LIMIT with `details.limit` and `details.running`.',
    body: SubmitTask,
    response: SubmittedTask,
    status: 202,
    errors: ['CONCURRENCY_LIMIT', 'CONTAINER_FAILED'],
  }),
  defineRoute({
    name: 'tasks.list',
    method: 'GET',
    path: '/v1/tasks',
    auth: 'caller',
    tag: 'tasks',
    summary: 'List your tasks, newest first',
    query: TaskListQuery,
    response: ListOf('tasks', Task),
  }),
  defineRoute({
    name: 'tasks.get',
    method: 'GET',
    path: '/v1/tasks/:id',
    auth: 'caller',
    tag: 'tasks',
    summary: 'Read a task: `result` once it ran, `error` once it failed',
    params: IdParams('task'),
    response: Task,
  }),
  defineRoute({
    name: 'tasks.events',
    method: 'GET',
    path: '/v1/tasks/:id/events',
    auth: 'caller',
    tag: 'tasks',
    summary: "A task's event log, paged forward with `after`",
    params: IdParams('task'),
    query: EventsQuery,
    response: ListOf('events', TranscriptEvent),
  }),
  defineRoute({
    name: 'tasks.cancel',
    method: 'POST',
    path: '/v1/tasks/:id/cancel',
    auth: 'caller',
    tag: 'tasks',
    summary: 'Cancel a task (a task already done is returned unchanged)',
    params: IdParams('task'),
    response: Task,
  }),
] as const

import { ApiError } from '../errors.js'
import { defineRoute } from '../route.js'

/** Documents the WebSocket in the route table; a plain GET is told to upgrade. */
export const wsRoute = defineRoute({
  name: 'ws',
  method: 'GET',
  path: '/v1/ws',
  auth: 'caller',
  tag: 'events',
  summary: 'WebSocket: submit tasks exactly once, stream their status and events',
  description: [
    'Open with `Upgrade: websocket` and `Authorization: Bearer <key>` (browsers: `?token=<key>`). Messages are JSON.',
    '',
    'Client → server: `{ type: "submit", request_id, task }` (a `request_id` already seen for this caller returns the first task, never a second one; the submitter is subscribed), `{ type: "subscribe", task_id }`, `{ type: "unsubscribe", task_id }`, `{ type: "ping" }`.',
    '',
    'Server → client: `{ type: "submitted", request_id, task_id, status }`, `{ type: "task.status", task_id, status, task }`, `{ type: "task.event", task_id, event }` (the stored transcript event: what already happened first, then live, each once, in `seq` order), `{ type: "error", request_id?, code, error, details? }`, `{ type: "pong" }`.',
    '',
    'A client that lets more than 1 MiB queue up unread is closed with code 4008.',
  ].join('\n'),
  errors: ['VALIDATION_FAILED'],
  handle: () => {
    throw new ApiError('VALIDATION_FAILED', 'This endpoint speaks WebSocket: connect with Upgrade: websocket', {
      issues: [{ location: 'headers', path: 'upgrade', message: 'expected "websocket"' }],
    })
  },
})

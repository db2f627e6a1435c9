import { defineRoute } from '../route.js'
import { ClientMessage, ServerMessage } from '../socket.js'

/** Documents the WebSocket in the route table (its messages are in `socket.ts`); a plain GET is told to upgrade. */
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
    'A client that lets more than 1 MiB queue up unread is closed with code 4008. A message larger than the JSON body limit (1 MiB by default) closes the socket with code 1009. Every message takes a token of your rate limit like a request; past it the answer is `{ type: "error", code: "RATE_LIMITED" }`. Errors answering a `subscribe` or `unsubscribe` carry its `task_id`.',
    '',
    'Without `Upgrade: websocket` the answer is 426 UPGRADE_REQUIRED.',
  ].join('\n'),
  upgrade: 'websocket',
  messages: { client: ClientMessage, server: ServerMessage },
  errors: ['UPGRADE_REQUIRED'],
})

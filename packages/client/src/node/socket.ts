import WebSocket from 'ws'
import type { ConnectSocket, WebSocketLike } from '../socket-connect.js'

/**
 * Open Berth's WebSocket with the `ws` package (Node 20 has no global `WebSocket`),
 * sending the token as `Authorization: Bearer …`.
 *
 * @example
 * ```ts
 * const socket = createBerthSocket({ baseURL, token, connect: nodeConnect })
 * ```
 */
export const nodeConnect: ConnectSocket = (url, token) =>
  new WebSocket(url, token ? { headers: { authorization: `Bearer ${token}` } } : {}) as unknown as WebSocketLike

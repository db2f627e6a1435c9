import { ApiError } from '@berth/contract'
import { defineHandlers } from '../route.js'

/** A plain GET of the WebSocket is told to upgrade (the socket itself is `transport/socket.ts`). */
export const wsHandlers = defineHandlers({
  ws: () => {
    throw new ApiError(
      'UPGRADE_REQUIRED',
      'This endpoint speaks WebSocket: connect with Upgrade: websocket',
      undefined,
      { upgrade: 'websocket', connection: 'Upgrade' },
    )
  },
})

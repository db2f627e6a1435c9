import type { AnyRoute } from '@berth/core'

/** Routes only the server can answer (documents served from its own assets). */
export const serverRoutes: readonly AnyRoute[] = []

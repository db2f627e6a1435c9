import { createBerth, type Berth, type BerthOptions } from '@berth/server'
import express, { type Express } from 'express'
import { berthRoutes } from './mount.js'
import { createSessions, type Sessions } from './sessions.js'

/**
 * An existing Express 5 application that embeds Berth. Its users sign in with the app's
 * own sessions; Berth trusts the app's `authenticate` hook instead of Berth caller keys,
 * so each app user owns their own profiles, credentials and tasks.
 *
 * Berth is reachable twice, to show both ways of mounting it:
 * - at the root, beside the app's routes (`/v1/…`, `/health`), via `berthRoutes`;
 * - under a prefix (`/berth/v1/…`): Express strips the mount path before Berth sees it.
 *
 * @example
 * ```ts
 * const { app, berth } = createApp({ dataDir: './.data' })
 * app.listen(3000)
 * ```
 */
export function createApp(options: Omit<BerthOptions, 'authenticate'> = {}): {
  app: Express
  berth: Berth
  sessions: Sessions
} {
  const sessions = createSessions()

  const berth = createBerth({
    ...options,
    // The host app's session → a Berth caller. Prefix the app's ids so they cannot be
    // mistaken for Berth's own user ids; keep them to letters, digits, `_` and `-`.
    authenticate: (request) => {
      const user = sessions.userFor(request.headers.get('authorization'))
      return user ? { id: `app-${user.id}`, role: user.admin ? ('admin' as const) : ('user' as const) } : null
    },
  })

  const app = express()
  // Berth first: it reads its own request bodies, so no body parser may run before it.
  app.use(berthRoutes(berth))
  app.use('/berth', berth.handler)

  // The app's own routes.
  app.use(express.json())
  app.get('/', (_req, res) => {
    res.type('text').send('Host app with Berth embedded: try GET /health or /berth/health')
  })
  app.post('/login', (req, res) => {
    // Demo sign-in: a real app checks a password, SSO, etc.
    const { id, name, admin = false } = (req.body ?? {}) as { id?: string; name?: string; admin?: boolean }
    if (!id || !/^[A-Za-z0-9_-]{1,64}$/.test(id) || !name) {
      res.status(400).json({ error: 'id (letters, digits, _ and -) and name are required' })
      return
    }
    res.json({ session: sessions.signIn({ id, name, admin: Boolean(admin) }) })
  })
  app.get('/me', (req, res) => {
    const user = sessions.userFor(req.get('authorization'))
    if (!user) res.status(401).json({ error: 'sign in first' })
    else res.json(user)
  })

  return { app, berth, sessions }
}

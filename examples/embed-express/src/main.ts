/**
 * Run the host app with Berth embedded:
 *
 *   pnpm --filter @berth/example-embed-express start     # PORT (default 3001)
 */
import { createApp } from './app.js'

const port = Number(process.env.PORT ?? 3001)
const { app, berth } = createApp({ dataDir: process.env.BERTH_DATA_DIR ?? './.data' })
const server = app.listen(port, '127.0.0.1', () => {
  console.log(`Host app on http://127.0.0.1:${port} (Berth at / and /berth)`)
})

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    server.close(() => void berth.close().then(() => process.exit(0)))
    server.closeAllConnections()
  })
}

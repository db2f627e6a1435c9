/**
 * Use @berth/client against a running Berth (start one with `pnpm start` at the root):
 *
 *   BERTH_TOKEN=<caller key> pnpm --filter @berth/example-client-usage start
 *   BERTH_ADMIN_TOKEN=<operator token> pnpm --filter @berth/example-client-usage start
 *
 * With only the operator token, a user is created first (through the admin API) and its
 * new caller key is used.
 */
import { createBerthClient, isBerthError } from '@berth/client/node'
import { demo } from './demo.js'

const baseURL = process.env.BERTH_URL ?? 'http://127.0.0.1:3000'

async function callerToken(): Promise<string> {
  if (process.env.BERTH_TOKEN) return process.env.BERTH_TOKEN
  const adminToken = process.env.BERTH_ADMIN_TOKEN
  if (!adminToken) throw new Error('Set BERTH_TOKEN (a caller key) or BERTH_ADMIN_TOKEN (the operator token)')
  const admin = createBerthClient({ baseURL, token: adminToken })
  const { user, key } = await admin.admin.users.create({ body: { name: 'client-usage demo' } })
  console.log(`created user ${user.id} with a new caller key`)
  return key.token
}

try {
  await demo(createBerthClient({ baseURL, token: await callerToken() }))
} catch (err) {
  if (isBerthError(err)) {
    console.error(`Berth said ${err.status} ${err.code}: ${err.message}`, ...(err.details ? [err.details] : []))
  } else {
    console.error((err as Error).message)
  }
  process.exit(1)
}

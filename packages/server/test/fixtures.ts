import type { TestServer } from './helpers.js'

/** A user of the test server with a helper to call it. */
export interface Actor {
  id: string
  token: string
}

async function created(res: Response, what: string): Promise<{ id: string }> {
  if (res.status !== 201) throw new Error(`fixture ${what}: ${res.status} ${await res.text()}`)
  return (await res.json()) as { id: string }
}

/**
 * Valid create bodies and resource factories, keyed by the collection path of the route
 * table. The contract test uses them to reach every `:id` route with a real resource; a
 * route whose collection has no entry here fails the test, so new routes must add one.
 */
export function fixtures(s: TestServer) {
  const post = (a: Actor, path: string, json: unknown) => s.request(path, { method: 'POST', token: a.token, json })
  let n = 0
  const uniq = () => `f${++n}`

  const bodies = {
    '/v1/api-keys': async () => ({ name: 'stub key', provider: 'stub' }),
    '/v1/profiles': async (a: Actor) => ({
      name: 'Profile',
      slug: `p-${uniq()}`,
      api_key_id: (await created(await post(a, '/v1/api-keys', { name: 'k', provider: 'stub' }), 'api key')).id,
    }),
    '/v1/memory': async () => ({ type: 'fact', name: 'Fact', body: 'The sky is blue.' }),
    '/v1/secrets': async () => ({ name: `SECRET_${uniq().toUpperCase()}`, value: 'shh' }),
    '/v1/tools': async () => ({
      name: `tool-${uniq()}`,
      server: { type: 'stdio', command: 'node', args: ['server.js'] },
    }),
    '/v1/skills': async () => ({ name: `skill-${uniq()}`, body: '# Skill\nDo the thing.' }),
    '/v1/agents': async () => ({ name: `agent-${uniq()}`, prompt: 'You review code.' }),
    '/v1/environments': async () => ({ name: 'Environment', network: { policy: 'none' }, limits: { cpus: 1 } }),
    '/v1/tasks': async (a: Actor) => ({
      mode: 'batch',
      profile_id: await make('/v1/profiles', a),
      prompt: 'Say hello.',
    }),
    '/v1/playbooks': async (a: Actor) => ({
      profile_id: await make('/v1/profiles', a),
      name: 'Playbook',
      prompt: 'Summarise the news.',
    }),
    // Email: a webhook URL would have to resolve (no DNS here) to a public address.
    '/v1/integrations': async () => ({ type: 'email', config: { recipients: ['ops@example.com'] } }),
    // Bodies the bank and messenger flows accept (no provider answers on the contract server: a full run is a 502).
    '/v1/integrations/bankprovider/config': async () => ({ application_id: 'app_fixture', environment: 'sandbox' }),
    '/v1/integrations/bankprovider/callback': async () => ({
      accessToken: 'token_fixture',
      enrollment: { id: 'enr_fixture', institution: { name: 'Fixture Bank' } },
      user: { id: 'usr_fixture' },
    }),
    '/v1/integrations/messenger/setup': async () => ({ bot_token: '123456:AAfixture-token-0000000000000000' }),
  } satisfies Record<string, (a: Actor) => Promise<Record<string, unknown>>>

  /** Submit a task; returns its id (tasks answer 202 with `task_id`). */
  async function task(a: Actor): Promise<{ task_id: string }> {
    const res = await post(a, '/v1/tasks', await bodies['/v1/tasks'](a))
    if (res.status !== 202) throw new Error(`fixture task: ${res.status} ${await res.text()}`)
    return (await res.json()) as { task_id: string }
  }

  /** Collections whose resources are not made by a plain create. */
  const special: Record<string, (a: Actor) => Promise<string>> = {
    // Git accounts come from a provider's OAuth flow (tested against the fake providers in
    // git-accounts.test.ts); the contract server has no provider, so the account is stored
    // the way the callback stores it, through the service.
    '/v1/integrations/git/accounts': async (a) => {
      const tokens = { access_token: `gho_fixture_${uniq()}`, refresh_token: null, expires_at: null, scopes: ['repo'] }
      return (await s.berth.services.gitAccounts.connect(a.id, 'github', tokens, { id: uniq(), login: 'octocat' })).id
    },
    '/v1/tasks': async (a) => (await task(a)).task_id,
    // Audit entries are what a caller's actions leave: creating a secret leaves one.
    '/v1/audit': async (a) => {
      await make('/v1/secrets', a)
      const res = await s.request('/v1/audit?limit=1', { token: a.token })
      return ((await res.json()) as { entries: { id: string }[] }).entries[0]!.id
    },
    // Users are the operator's: made through the admin API whoever asks.
    '/admin/users': async () => (await s.user('Fixture user')).id,
    // A workspace comes into being with its first task.
    '/v1/workspaces': async (a) => {
      const { task_id } = await task(a)
      const res = await s.request(`/v1/tasks/${task_id}`, { token: a.token })
      return ((await res.json()) as { workspace_id: string }).workspace_id
    },
  }

  /** Create one resource of the collection for an actor; returns its id. */
  async function make(collection: string, a: Actor): Promise<string> {
    if (special[collection]) return special[collection](a)
    const body = bodies[collection as keyof typeof bodies]
    if (!body) throw new Error(`no fixture for collection ${collection}: add one to test/fixtures.ts`)
    return (await created(await post(a, collection, await body(a)), collection)).id
  }

  /** Valid bodies of actions on an existing resource whose body has required fields, by route name. */
  const actionBodies = {
    'tasks.messages.send': () => ({ text: 'Use pnpm, not npm' }),
    'tasks.approvals.decide': () => ({ decision: 'deny' }),
    'workspaces.previews.create': () => ({ port: 8000 }),
    'workspaces.rewind': () => ({ to_task_id: 'task_zzzzzzzzzzzzzzzzzzzz' }),
  } satisfies Record<string, () => Record<string, unknown>>

  return { bodies, make, actionBodies }
}

/**
 * The collection a route's `:id` belongs to: `/v1/profiles/:id/models` → `/v1/profiles`.
 * Admin routes are keyed by their own collection names (`/admin/users`, `/admin/keys`).
 */
export function collectionOf(path: string): string {
  return path.slice(0, path.indexOf('/:'))
}

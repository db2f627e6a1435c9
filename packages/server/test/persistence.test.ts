import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { expect, it } from 'vitest'
import { startServer } from './helpers.js'

const fsStorage = (dir: string) => createStorage({ driver: fsDriver({ base: join(dir, 'store') }) })

it('data, caller keys and encrypted values survive a restart on the fs driver', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-restart-'))
  const first = await startServer({ dataDir, storage: fsStorage(dataDir) })
  const { token } = await first.user()
  const key = (await (await first.request('/v1/api-keys', { method: 'POST', token, json: { name: 'k', provider: 'anthropic', key: 'sk-restart' } })).json()) as { id: string }
  const profile = (await (
    await first.request('/v1/profiles', { method: 'POST', token, json: { name: 'P', slug: 'p', api_key_id: key.id, claude_md: '# Hello' } })
  ).json()) as { id: string }
  const secret = await first.request('/v1/secrets', { method: 'POST', token, json: { name: 'A_SECRET', value: 'kept' } })
  expect(secret.status).toBe(201)
  await first.close()

  // A new process would build everything from the same data dir: same here.
  const second = await startServer({ dataDir, storage: fsStorage(dataDir) })
  try {
    const res = await second.request(`/v1/profiles/${profile.id}`, { token })
    expect(res.status).toBe(200)
    expect(await res.json()).toMatchObject({ id: profile.id, claude_md: '# Hello', api_key_id: key.id })
    const owner = (await second.berth.services.users.authenticate(token))!.id
    // The generated encryption key was reused, so the old ciphertexts still open.
    expect(await second.berth.services.secrets.environment(owner, profile.id)).toEqual({ A_SECRET: 'kept' })
    expect((await second.berth.services.apiKeys.resolve(owner, key.id)).key).toBe('sk-restart')
    // Slug uniqueness sees the persisted profile.
    const dup = await second.request('/v1/profiles', { method: 'POST', token, json: { name: 'Q', slug: 'p', api_key_id: key.id } })
    expect(dup.status).toBe(400)
  } finally {
    await second.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
})

import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { expect, it } from 'vitest'
import { clientFor, failure, startServer } from './helpers.js'

const fsStorage = (dir: string) => createStorage({ driver: fsDriver({ base: join(dir, 'store') }) })

it('data, caller keys and encrypted values survive a restart on the fs driver', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-restart-'))
  const first = await startServer({ dataDir, storage: fsStorage(dataDir) })
  const { token } = await first.user()
  const api = clientFor(first, token)
  const key = await api.apiKeys.create({ body: { name: 'k', provider: 'anthropic', key: 'sk-restart' } })
  const profile = await api.profiles.create({
    body: { name: 'P', slug: 'p', api_key_id: key.id, claude_md: '# Hello' },
  })
  expect(await api.secrets.create({ body: { name: 'A_SECRET', value: 'kept' } })).toMatchObject({ name: 'A_SECRET' })
  await first.close()

  // A new process would build everything from the same data dir: same here.
  const second = await startServer({ dataDir, storage: fsStorage(dataDir) })
  try {
    const again = clientFor(second, token)
    expect(await again.profiles.get({ params: { id: profile.id } })).toMatchObject({
      id: profile.id,
      claude_md: '# Hello',
      api_key_id: key.id,
    })
    const owner = (await second.berth.services.users.authenticate(token))!.id
    // The generated encryption key was reused, so the old ciphertexts still open.
    expect(await second.berth.services.secrets.forTask(owner, profile.id)).toEqual([
      { name: 'A_SECRET', delivery: 'env', value: 'kept' },
    ])
    expect((await second.berth.services.apiKeys.resolve(owner, key.id)).key).toBe('sk-restart')
    // Slug uniqueness sees the persisted profile.
    const dup = await failure(again.profiles.create({ body: { name: 'Q', slug: 'p', api_key_id: key.id } }))
    expect(dup.status).toBe(400)
  } finally {
    await second.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
})

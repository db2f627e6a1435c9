import type { BerthClient } from '@berth/client'

/**
 * The walk-through: an offline model credential (provider `stub`, no key needed), a
 * profile using it, the models it allows, then clean-up. Returns what it created.
 *
 * @example
 * ```ts
 * await demo(createBerthClient({ baseURL, token }), console.log)
 * ```
 */
export async function demo(berth: BerthClient, log: (line: string) => void = console.log) {
  const { version } = await berth.health()
  log(`Berth ${version} is up`)

  // `client.apiKeys` is the camelCase alias of `client['api-keys']`.
  const credential = await berth.apiKeys.create({ body: { name: 'Offline model', provider: 'stub' } })
  log(`created model credential ${credential.id} (provider ${credential.provider}, key stored: ${credential.has_key})`)

  const slug = `demo-${Date.now().toString(36)}`
  const profile = await berth.profiles.create({
    body: { name: 'Demo profile', slug, api_key_id: credential.id, claude_md: '# Demo\nAnswer briefly.' },
  })
  log(`created profile ${profile.id} (${profile.slug})`)

  const { models } = await berth.profiles.models({ params: { id: profile.id } })
  log(`models for ${profile.slug}: ${models.map((m) => m.id).join(', ') || '(none)'}`)

  const { total } = await berth.profiles.list({ query: { limit: 5 } })
  log(`you have ${total} profile(s)`)

  await berth.profiles.delete({ params: { id: profile.id } })
  await berth.apiKeys.delete({ params: { id: credential.id } })
  log('cleaned up')
  return { credential, profile, models }
}

import type { NodeBerthClient } from '@berth/client/node'

/**
 * The walk-through: an offline model credential (provider `stub`, no key needed), a
 * profile using it, one real agent task streamed as it runs (its text, a shell tool call
 * and its output), a follow-up session, then clean-up. `write` gets the output as it
 * happens. Returns what it created and the finished tasks.
 *
 * @example
 * ```ts
 * await demo(createBerthClient({ baseURL, token }), (text) => process.stdout.write(text))
 * ```
 */
export async function demo(
  berth: NodeBerthClient,
  write: (text: string) => void = (text) => process.stdout.write(text),
) {
  const log = (line: string) => write(`${line}\n`)
  const { version } = await berth.health()
  log(`Berth ${version} is up`)

  // `client.apiKeys` is the camelCase alias of `client['api-keys']`.
  const credential = await berth.apiKeys.create({ body: { name: 'Offline model', provider: 'stub' } })
  log(`created model credential ${credential.id} (provider ${credential.provider}, key stored: ${credential.has_key})`)

  const slug = `demo-${Date.now().toString(36)}`
  const profile = await berth.profiles.create({
    body: {
      name: 'Demo profile',
      slug,
      api_key_id: credential.id,
      claude_md: '# Demo\nAnswer briefly.',
      default_tools: ['Bash'],
    },
  })
  log(`created profile ${profile.id} (${profile.slug})`)

  // A real task: the offline model is scripted by directives in the prompt. Submit it,
  // then stream its events as they happen (the stream resumes by itself after a drop).
  const { task_id } = await berth.tasks.submit({
    body: {
      mode: 'batch',
      profile_id: profile.id,
      prompt: 'Look around. [[berth:tool Bash {"command":"uname -s"}]] [[berth:text The workspace runs Linux.]]',
    },
  })
  log(`submitted ${task_id}; streaming:`)
  const stream = berth.tasks.stream(task_id)
  for await (const event of stream) {
    if (event.type === 'token') write(event.text)
    else if (event.type === 'tool_call') write(`\n  > ${event.name} ${JSON.stringify(event.input)}\n`)
    else if (event.type === 'tool_result') write(`  < ${event.output.trim()}\n`)
  }
  const task = await stream.finalTask()
  write('\n')
  log(
    `${task.status}: ${task.result?.turns} turns, ${task.result?.input_tokens} in / ${task.result?.output_tokens} out tokens, $${task.result?.cost_usd.toFixed(4)}`,
  )

  // A session: follow-ups continue the same conversation and workspace.
  const session = berth.sessions.start({ profile_id: profile.id })
  await session.send('My favourite colour is teal.')
  const recall = await session.send('What did I say first? [[berth:recall]]')
  log(`session ${session.id}: ${recall.result?.text}`)
  await session.close({ deleteWorkspace: true })

  await berth.workspaces.delete({ params: { id: task.workspace_id! } })
  await berth.profiles.delete({ params: { id: profile.id } })
  await berth.apiKeys.delete({ params: { id: credential.id } })
  log('cleaned up')
  return { credential, profile, task, recall }
}

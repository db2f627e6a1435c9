import { defineCommand } from 'citty'
import { action, clientFor, commonArgs, log, oneLine, printJson, printTable } from '../context.js'

const workspace = { type: 'positional', description: 'Workspace id (ws_…) of a session', required: true } as const

/** `3 s`, `5 min`, `2 h`, `4 d` from an ISO time to now. */
function ago(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000))
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.floor(s / 60)} min`
  if (s < 86400) return `${Math.floor(s / 3600)} h`
  return `${Math.floor(s / 86400)} d`
}

/** `berth sessions show <workspace>`: the session, its living agent and what it runs in the background. */
export const showCommand = defineCommand({
  meta: {
    name: 'show',
    description: 'Show a session: its status, its living agent and what that runs in the background (since when)',
  },
  args: { workspace, ...commonArgs },
  run: ({ args }) =>
    action(async () => {
      const ws = await clientFor(args).workspaces.get({ params: { id: args.workspace } })
      if (args.json) return printJson(ws)
      const agent = ws.agent
      printTable([
        ['workspace', ws.id],
        ['session', ws.session_id],
        ['name', ws.name],
        ['status', ws.status],
        ['profile', ws.profile_id ?? '-'],
        ['last active', `${ws.last_active_at} (${ago(ws.last_active_at)} ago)`],
        ...(ws.forked_from ? [['forked from', `${ws.forked_from.workspace_id} at ${ws.forked_from.task_id}`]] : []),
        [
          'agent',
          agent
            ? `up since ${agent.since} (${ago(agent.since)}), ${agent.tasks} task${agent.tasks === 1 ? '' : 's'} served`
            : 'none (the next follow-up starts one and resumes the conversation)',
        ],
      ])
      if (!agent) return
      if (!agent.background.length) return log.info('Nothing runs in the background.')
      process.stdout.write('\n')
      printTable([
        ['BACKGROUND', 'KIND', 'SINCE', 'RUNNING FOR', 'WHAT'],
        ...agent.background.map((b) => [b.id, b.kind, b.since, ago(b.since), oneLine(b.description, 160)]),
      ])
    }),
})

/** `berth sessions stop <workspace>`: the living agent and its background work end, the container is released. */
export const stopCommand = defineCommand({
  meta: {
    name: 'stop',
    description:
      'Stop a session now: its agent and what it runs in the background end, its container is released (files and conversation are kept)',
  },
  args: { workspace, ...commonArgs },
  run: ({ args }) =>
    action(async () => {
      const ws = await clientFor(args).workspaces.stop({ params: { id: args.workspace } })
      if (args.json) return printJson(ws)
      log.success(
        `stopped ${ws.id}: no agent or background process runs; the next follow-up (berth sessions --session ${ws.session_id}) resumes the conversation`,
      )
    }),
})

import { defineCommand } from 'citty'
import { action, clientFor, commonArgs, log, printJson, printTable } from '../context.js'

const workspace = { type: 'positional', description: 'Workspace id (ws_…) of a session', required: true } as const

const open = defineCommand({
  meta: { name: 'open', description: "Open a preview link to a port inside the session's container" },
  args: {
    workspace,
    port: { type: 'positional', description: 'Port inside the container (1-65535)', required: true },
    ttl: { type: 'string', description: "Seconds until the link expires (default: the server's)", valueHint: 's' },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const body = { port: Number(args.port), ...(args.ttl && { ttl_s: Number(args.ttl) }) }
      const p = await clientFor(args).workspaces.previews.create({ params: { id: args.workspace }, body })
      if (args.json) return printJson(p)
      // The URL carries the token: shown once, to the one who asked.
      log.success(`${p.url}  (port ${p.port}, until ${p.expires_at}, ${p.id})`)
    }),
})

const ls = defineCommand({
  meta: { name: 'ls', description: "List a workspace's live preview links (without their tokens)" },
  args: { workspace, ...commonArgs },
  run: ({ args }) =>
    action(async () => {
      const list = await clientFor(args).workspaces.previews.list({ params: { id: args.workspace } })
      if (args.json) return printJson(list)
      printTable([
        ['ID', 'PORT', 'EXPIRES', 'CREATED'],
        ...list.previews.map((p) => [p.id, String(p.port), p.expires_at, p.created_at]),
      ])
    }),
})

const revoke = defineCommand({
  meta: { name: 'revoke', description: 'Revoke a preview link: its URL answers 404 from then on' },
  args: {
    workspace,
    preview: { type: 'positional', description: 'Preview id (prv_…)', required: true },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      await clientFor(args).workspaces.previews.revoke({ params: { id: args.workspace, preview_id: args.preview } })
      if (args.json) return printJson({ revoked: args.preview })
      log.success(`revoked ${args.preview}`)
    }),
})

/** `berth previews open|ls|revoke <workspace> …`. */
export const previewsCommand = defineCommand({
  meta: { name: 'previews', description: 'Preview links to ports inside a session container: open, list, revoke' },
  subCommands: { open, ls, revoke },
})

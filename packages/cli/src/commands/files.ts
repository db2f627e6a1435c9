import { defineCommand } from 'citty'
import { action, clientFor, commonArgs, log, printJson, printTable } from '../context.js'

const ls = defineCommand({
  meta: { name: 'ls', description: "List a directory of a workspace's files" },
  args: {
    workspace: { type: 'positional', description: 'Workspace id (ws_…)', required: true },
    path: { type: 'positional', description: 'Directory (default /workspace)', required: false },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const listing = await clientFor(args).files.list(args.workspace, args.path ?? '')
      if (args.json) return printJson(listing)
      printTable([
        ['TYPE', 'SIZE', 'MODIFIED', 'NAME'],
        ...listing.entries.map((e) => [e.type, String(e.size), e.mtime, e.name]),
      ])
      if (listing.truncated) log.warn('listing truncated')
    }),
})

const put = defineCommand({
  meta: { name: 'put', description: 'Upload local files into a workspace' },
  args: {
    workspace: { type: 'positional', description: 'Workspace id (ws_…)', required: true },
    files: { type: 'positional', description: 'Local files to upload', required: true },
    dir: { type: 'string', description: 'Directory under /workspace (default .)', valueHint: 'dir' },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const paths = args._.slice(1)
      const result = await clientFor(args).files.upload(args.workspace, paths, { dir: args.dir ?? '.' })
      if (args.json) return printJson(result)
      for (const f of result.files) log.success(`${f.path} (${f.size} bytes)`)
    }),
})

const get = defineCommand({
  meta: { name: 'get', description: 'Download files or directories of a workspace into a local directory' },
  args: {
    workspace: { type: 'positional', description: 'Workspace id (ws_…)', required: true },
    paths: { type: 'positional', description: 'Paths under /workspace', required: true },
    out: { type: 'string', alias: 'o', description: 'Local directory to extract into (default .)', valueHint: 'dir' },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const written = await clientFor(args).files.downloadTo(args.workspace, args._.slice(1), args.out ?? '.')
      if (args.json) return printJson({ files: written })
      log.success(`${written.length} entr${written.length === 1 ? 'y' : 'ies'} into ${args.out ?? '.'}`)
    }),
})

/** `berth files ls|put|get <workspace> …`. */
export const filesCommand = defineCommand({
  meta: { name: 'files', description: "List, upload and download a workspace's files" },
  subCommands: { ls, put, get },
})

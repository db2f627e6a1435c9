import { defineCommand } from 'citty'
import { action, clientFor, commonArgs, log, printJson, printTable } from '../context.js'

const ls = defineCommand({
  meta: { name: 'ls', description: 'List your profiles' },
  args: { ...commonArgs },
  run: ({ args }) =>
    action(async () => {
      const { profiles, total } = await clientFor(args).profiles.list({ query: { limit: 100 } })
      if (args.json) return printJson({ profiles, total })
      printTable([
        ['SLUG', 'ID', 'MODEL', 'NAME'],
        ...profiles.map((p) => [p.slug, p.id, p.model ?? '(default)', p.name]),
      ])
      log.info(`${profiles.length} of ${total}`)
    }),
})

/** `berth profiles ls`. */
export const profilesCommand = defineCommand({
  meta: { name: 'profiles', description: 'List profiles' },
  subCommands: { ls },
})

import { defineCommand } from 'citty'
import { auditCommand } from './commands/audit.js'
import { filesCommand } from './commands/files.js'
import { playbooksCommand } from './commands/playbooks.js'
import { previewsCommand } from './commands/previews.js'
import { profilesCommand } from './commands/profiles.js'
import { runCommand } from './commands/run.js'
import { sessionsCommand } from './commands/sessions.js'
import { approvalsCommand, approveCommand, denyCommand, interruptCommand, sendCommand } from './commands/steer.js'
import { tasksCommand } from './commands/tasks.js'

/**
 * The `berth` command: run tasks, follow sessions, manage files, from a terminal.
 *
 * @example
 * ```ts
 * import { runMain } from 'citty'
 * await runMain(berth, { rawArgs: ['run', '--profile', 'docs', 'Hello'] })
 * ```
 */
export const berth = defineCommand({
  meta: { name: 'berth', description: 'Run Berth agent tasks from a terminal (BERTH_URL, BERTH_TOKEN)' },
  subCommands: {
    run: runCommand,
    tasks: tasksCommand,
    sessions: sessionsCommand,
    files: filesCommand,
    previews: previewsCommand,
    profiles: profilesCommand,
    playbooks: playbooksCommand,
    interrupt: interruptCommand,
    send: sendCommand,
    approvals: approvalsCommand,
    approve: approveCommand,
    deny: denyCommand,
    audit: auditCommand,
  },
})

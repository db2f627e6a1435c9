/**
 * `pnpm --filter @berth/standalone-server run prune [--dry-run]` (and `node dist/main.js prune`
 * in the server image): list, then remove, everything this deployment left on its runtimes.
 * See `pruneCommand`.
 */
import { pruneCommand } from '@berth/server'

// `node dist/main.js prune …` names the subcommand; pnpm passes a `--` through when one precedes the arguments.
const args = process.argv.slice(2).filter((a, i) => a !== '--' && !(i === 0 && a === 'prune'))
// Run through pnpm, the settings are read where the command was typed.
process.exitCode = await pruneCommand(args, process.env.INIT_CWD ?? process.cwd())

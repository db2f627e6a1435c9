/** `pnpm --filter @berth/standalone-server migrate --from <store-url> --to <store-url>`: see `migrateCommand`. */
import { migrateCommand } from '@berth/server'

// Run through pnpm, relative paths are where the command was typed.
process.exitCode = await migrateCommand(process.argv.slice(2), process.env.INIT_CWD ?? process.cwd())

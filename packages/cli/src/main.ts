import { runMain } from 'citty'
import { berth } from './index.js'

// `berth tasks ls --json | head`: a closed pipe ends the program quietly.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err
  process.exit(process.exitCode ?? 0)
})

await runMain(berth)

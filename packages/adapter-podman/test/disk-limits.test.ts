import { mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { diskLimitSuite, readEngine } from '@berth/testkit'
import { podmanRuntime } from '../src/index.js'

const engine = readEngine('podman')
const dir = mkdtempSync(join(tmpdir(), 'berth-disks-'))

diskLimitSuite('podman', () => podmanRuntime({ socketPath: engine.socketPath, disks: { dir } }), {
  image: engine.image,
  diskDir: dir,
})

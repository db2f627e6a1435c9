import { mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { diskLimitSuite, readEngine } from '@berth/testkit'
import { dockerRuntime } from '../src/index.js'

const engine = readEngine('docker')
const dir = mkdtempSync(join(tmpdir(), 'berth-disks-'))

diskLimitSuite('docker', () => dockerRuntime({ socketPath: engine.socketPath, disks: { dir } }), {
  image: engine.image,
  diskDir: dir,
})

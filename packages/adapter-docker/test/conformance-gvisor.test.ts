import Docker from 'dockerode'
import { readEngine, runtimeConformanceSuite } from '@berth/testkit'
import { dockerRuntime } from '../src/index.js'

// The whole suite again with every container under gVisor (runsc, registered with the engine
// by scripts/gvisor/ensure.sh, which the global setup runs): nothing skipped.
const engine = readEngine('docker')

runtimeConformanceSuite('docker (gvisor)', () => dockerRuntime({ socketPath: engine.socketPath }), {
  image: engine.image,
  isolation: 'gvisor',
  capabilities: { isolation: true, limits: true, unprivilegedUser: true, egress: ['none', 'public', 'allowlist'] },
  makeUnreachable: () => dockerRuntime({ socketPath: '/nonexistent/berth-test/docker.sock' }),
  killFromOutside: async (id) => {
    await new Docker({ socketPath: engine.socketPath }).getContainer(id).kill()
  },
  images: {
    removeImage: async (ref) => {
      await new Docker({ socketPath: engine.socketPath }).getImage(ref).remove({ force: true })
    },
  },
})

import Docker from 'dockerode'
import { readEngine, runtimeConformanceSuite } from '@berth/testkit'
import { podmanRuntime } from '../src/index.js'

// The whole suite again with every container under gVisor (runsc, registered with the engine
// by scripts/gvisor/ensure.sh, which the global setup runs): nothing skipped.
const engine = readEngine('podman')

runtimeConformanceSuite('podman (gvisor)', () => podmanRuntime({ socketPath: engine.socketPath }), {
  image: engine.image,
  isolation: 'gvisor',
  capabilities: { isolation: true, limits: true, unprivilegedUser: true, egress: ['none', 'public', 'allowlist'] },
  makeUnreachable: () => podmanRuntime({ socketPath: '/nonexistent/berth-test/podman.sock' }),
  killFromOutside: async (id) => {
    await new Docker({ socketPath: engine.socketPath }).getContainer(id).kill()
  },
  images: {
    removeImage: async (ref) => {
      await new Docker({ socketPath: engine.socketPath }).getImage(ref).remove({ force: true })
    },
  },
})

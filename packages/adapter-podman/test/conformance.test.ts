import Docker from 'dockerode'
import { readEngine, runtimeConformanceSuite } from '@berth/testkit'
import { podmanRuntime } from '../src/index.js'

const engine = readEngine('podman')

runtimeConformanceSuite('podman', () => podmanRuntime({ socketPath: engine.socketPath }), {
  image: engine.image,
  // Containers: namespaces, dropped capabilities and enforced limits are required.
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

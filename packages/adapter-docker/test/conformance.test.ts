import Docker from 'dockerode'
import { readEngine, runtimeConformanceSuite } from '@berth/testkit'
import { dockerRuntime } from '../src/index.js'

const engine = readEngine('docker')

runtimeConformanceSuite('docker', () => dockerRuntime({ socketPath: engine.socketPath }), {
  image: engine.image,
  // Containers: namespaces, dropped capabilities and enforced limits are required.
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

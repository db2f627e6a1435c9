import { defineConfig } from 'tsup'
import { bundleDependencies } from '../../tsup.bundle.js'
import { packageBuild } from '../../tsup.shared.js'

/**
 * dockerode and docker-modem are bundled with ssh2 (for `ssh://` engines), so that installing
 * this package installs none of the packages whose install scripts npm would run: ssh2's
 * optional native parts are left out (it loads them in `try` and has JavaScript fallbacks),
 * and the gRPC/protobuf packages serve only BuildKit sessions and BuildKit progress decoding
 * (`buildImage` with `version: '2'`, `followProgress`), which Berth never uses.
 */
export default defineConfig(
  packageBuild(
    bundleDependencies({
      bundle: ['dockerode', 'docker-modem', 'ssh2'],
      stubs: [
        {
          modules: /^(@grpc\/grpc-js|@grpc\/proto-loader|protobufjs)$/,
          message:
            "BuildKit sessions are not bundled with @berth/adapter-docker (Berth never builds with version: '2')",
        },
        {
          modules: /^cpu-features$/,
          message: 'native add-on not bundled; ssh2 uses its JavaScript implementation',
        },
      ],
    }),
  ),
)

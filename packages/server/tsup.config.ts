import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { defineConfig } from 'tsup'
import { bundleDependencies } from '../../tsup.bundle.js'
import { packageBuild } from '../../tsup.shared.js'
import { SWAGGER_UI_FILES } from './src/docs-assets.js'

/**
 * The Swagger UI files `/docs` serves, copied into `dist/swagger-ui` with their licence, so
 * the published package needs no swagger-ui-dist (whose install script phones home).
 */
function copySwaggerUi(): void {
  const from = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
  const to = join('dist', 'swagger-ui')
  mkdirSync(to, { recursive: true })
  for (const name of [...SWAGGER_UI_FILES, 'LICENSE', 'NOTICE']) copyFileSync(join(from, name), join(to, name))
  const { version } = JSON.parse(readFileSync(join(from, 'package.json'), 'utf8')) as { version: string }
  writeFileSync(join(to, 'VERSION'), `${version}\n`)
}

/**
 * bullmq is bundled with msgpackr, so that installing this package does not install
 * msgpackr's optional native add-on (whose install script npm would run): msgpackr loads it in
 * `try` and encodes in JavaScript without it. bullmq finds `ioredis`, a dependency of this package.
 */
const bullmq = bundleDependencies({
  bundle: ['bullmq', 'msgpackr'],
  stubs: [
    {
      modules: /^msgpackr-extract$/,
      message: 'native add-on not bundled; msgpackr uses its JavaScript implementation',
    },
  ],
})

export default defineConfig(packageBuild({ ...bullmq, onSuccess: async () => copySwaggerUi() }))

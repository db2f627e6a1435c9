/**
 * `pnpm image`: build the server image and the agent image on the local engine.
 *
 *   pnpm image                    # docker
 *   pnpm image -- --engine podman
 *   pnpm image -- --force         # rebuild even when current
 */
import { parseArgs } from 'node:util'
import { buildServerImage } from './build.js'

const { values } = parseArgs({
  // pnpm passes a `--` through when the arguments follow one (`pnpm image -- --force`).
  args: process.argv.slice(2).filter((a) => a !== '--'),
  options: { engine: { type: 'string', default: 'docker' }, force: { type: 'boolean', default: false } },
})
if (values.engine !== 'docker' && values.engine !== 'podman') {
  console.error(`berth image: --engine is docker or podman, not ${values.engine}`)
  process.exit(2)
}
try {
  const started = performance.now()
  const image = await buildServerImage({
    engine: values.engine,
    force: values.force,
    log: (line) => console.log(`[image] ${line}`),
  })
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  console.log(
    `${image.built ? 'built' : 'current'}: ${image.server} and ${image.agent} (recipe ${image.recipe}, ${seconds} s)`,
  )
} catch (err) {
  console.error(`berth image: ${(err as Error).message}`)
  process.exit(1)
}

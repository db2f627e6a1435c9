/** Named volumes of the local runtime: `<baseDir>/volumes/<name>`, labels beside them in `volume-labels/`. */
import { access, mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { MANAGED_LABEL, type ContainerRuntime } from '@berth/core'
import type { LocalContext } from './local-context.js'

/**
 * `createVolume`, `listVolumes` and `removeVolume` of a local runtime.
 *
 * @example
 * ```ts
 * const volumes = localVolumes(ctx)
 * await volumes.createVolume('ws-1', { labels: { 'berth.owner': 'usr_1' } })
 * ```
 */
export function localVolumes(
  ctx: LocalContext,
): Pick<ContainerRuntime, 'createVolume' | 'listVolumes' | 'removeVolume'> {
  const { baseDir } = ctx
  const checkVolumeName = (name: string) => {
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name))
      throw ctx.fail('engine_error', `invalid volume name ${JSON.stringify(name)}`)
  }
  return {
    async createVolume(name, opts = {}) {
      checkVolumeName(name)
      await mkdir(join(baseDir, 'volumes', name), { recursive: true })
      // Labels beside the volumes (a volume's own directory is the workspace's files).
      const labelFile = join(baseDir, 'volume-labels', `${name}.json`)
      if (
        await access(labelFile).then(
          () => false,
          () => true,
        )
      ) {
        await mkdir(dirname(labelFile), { recursive: true })
        await writeFile(labelFile, JSON.stringify({ ...opts.labels, [MANAGED_LABEL]: 'true' }))
      }
    },

    async listVolumes(filter = {}) {
      await ctx.ensureBase()
      const dir = join(baseDir, 'volume-labels')
      const out: { name: string; labels: Record<string, string> }[] = []
      for (const file of await readdir(dir).catch(() => [] as string[])) {
        const labels = JSON.parse(await readFile(join(dir, file), 'utf8').catch(() => '{}')) as Record<string, string>
        const ok = Object.entries(filter.labels ?? {}).every(([k, v]) => (v === true ? k in labels : labels[k] === v))
        if (ok && file.endsWith('.json')) out.push({ name: file.slice(0, -'.json'.length), labels })
      }
      return out
    },

    async removeVolume(name) {
      checkVolumeName(name)
      await rm(join(baseDir, 'volumes', name), { recursive: true, force: true })
      await rm(join(baseDir, 'volume-labels', `${name}.json`), { force: true })
    },
  }
}

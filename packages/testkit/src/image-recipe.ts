import { existsSync, readFileSync } from 'node:fs'
import type { ImageRecipe } from '@berth/core'
import { packTar } from './tar.js'

/** Where the host keeps busybox (a static one: the recipe holds nothing else). */
function hostBusybox(): string {
  const found = ['/bin/busybox', '/usr/bin/busybox'].find((p) => existsSync(p))
  if (!found)
    throw new Error("the tiny image recipe needs the host's static busybox (Debian: apt-get install busybox-static)")
  return found
}

/**
 * A tiny {@link ImageRecipe} for tests of image provisioning: the host's static busybox
 * as `sh`, `sleep` and `cat`, `/tmp`, `/workspace`, and `/marker` holding `marker`.
 * `builds` counts how often its root filesystem was asked for.
 *
 * @example
 * ```ts
 * const recipe = busyboxRecipe('test-1', 'hello')
 * await runtime.ensureImage!('127.0.0.1:1/berth-t:v1', { recipe })
 * recipe.builds // 1
 * ```
 */
export function busyboxRecipe(hash: string, marker: string): ImageRecipe & { builds: number } {
  const recipe = {
    hash,
    description: `busybox with marker ${marker}`,
    builds: 0,
    env: { PATH: '/bin' },
    cmd: ['/bin/sh'],
    rootfs(): AsyncIterable<Uint8Array> {
      recipe.builds++
      return (async function* () {
        yield await packTar([
          { name: 'bin/', type: 'directory' },
          { name: 'bin/busybox', content: readFileSync(hostBusybox()), mode: 0o755 },
          // chown: containers start by giving /workspace to the unprivileged agent user.
          ...['sh', 'sleep', 'cat', 'chown'].map((a) => ({
            name: `bin/${a}`,
            type: 'symlink' as const,
            linkname: 'busybox',
          })),
          { name: 'tmp/', type: 'directory', mode: 0o1777 },
          { name: 'workspace/', type: 'directory' },
          { name: 'marker', content: marker },
        ])
      })()
    },
  }
  return recipe
}

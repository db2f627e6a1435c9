import { randomBytes } from 'node:crypto'
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import type { BlobStore } from '@berth/core'

/**
 * Blobs as files under `dir` (`<dataDir>/snapshots` in `createBerth`), written to a
 * temporary file and renamed into place, so a reader never sees half a tar. Keys are
 * checked, never trusted as paths: segments of letters, digits, `_`, `-` and `.`, no `..`.
 *
 * @example
 * ```ts
 * const blobs = fileBlobs('./.data/snapshots')
 * await blobs.put('usr_1/ws_1.tar', tar)
 * ```
 */
export function fileBlobs(dir: string): BlobStore {
  const base = resolve(dir)
  const path = (key: string) => {
    if (!/^[\w-][\w.-]*(\/[\w-][\w.-]*)*$/.test(key) || key.split('/').includes('..'))
      throw new Error(`not a blob key: ${JSON.stringify(key)}`)
    return join(base, key)
  }
  return {
    async put(key, bytes) {
      const file = path(key)
      const tmp = join(base, `.tmp-${randomBytes(8).toString('hex')}`)
      await mkdir(dirname(file), { recursive: true })
      await writeFile(tmp, bytes)
      await rename(tmp, file)
    },
    async get(key) {
      return readFile(path(key)).then(
        (b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength),
        (err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return null
          throw err
        },
      )
    },
    async remove(key) {
      await rm(path(key), { force: true })
    },
  }
}

import { randomBytes } from 'node:crypto'
import { mkdir, rename, writeFile } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { defineDriver } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'

/**
 * unstorage's fs driver with atomic writes: each value is written to a temporary file and
 * renamed over the old one. The plain driver truncates and rewrites in place, so a read
 * racing a write sees an empty file (a record "not found" that exists), and a process
 * killed mid-write leaves a truncated record behind. Temporary files live beside the
 * store (`<base>.tmp/`, same filesystem), never inside it, so key listings never see them.
 *
 * @example
 * ```ts
 * const storage = createStorage({ driver: atomicFsDriver({ base: './.data/store' }) })
 * ```
 */
export const atomicFsDriver = defineDriver((opts: { base: string }) => {
  const inner = fsDriver(opts)
  const base = resolve(opts.base)
  const tmpDir = `${base}.tmp`
  const write = async (key: string, value: string | Uint8Array) => {
    // The same key rules as the fs driver (no `..` segments).
    if (/\.\.:|\.\.$/.test(key))
      throw new Error(`[unstorage] [fs] Invalid key: ${JSON.stringify(key)}. It should not contain .. segments`)
    const file = join(base, key.replace(/:/g, '/'))
    const tmp = join(tmpDir, `${randomBytes(8).toString('hex')}.tmp`)
    await mkdir(tmpDir, { recursive: true })
    await mkdir(dirname(file), { recursive: true })
    await writeFile(tmp, value)
    await rename(tmp, file)
  }
  return {
    ...inner,
    name: 'fs-atomic',
    setItem: (key: string, value: string) => write(key, value),
    setItemRaw: (key: string, value: Uint8Array) => write(key, value),
  }
})

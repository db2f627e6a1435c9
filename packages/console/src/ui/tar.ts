import { parseTar } from 'nanotar'

/**
 * The first regular file of a tar archive, or `null`: enough to hand a single downloaded
 * file to the user as itself rather than as an archive. Parsed by nanotar (PAX and GNU
 * long names included).
 *
 * @example
 * ```ts
 * const file = firstFile(new Uint8Array(await res.arrayBuffer())) // { name: 'notes.txt', data }
 * ```
 */
export function firstFile(tar: Uint8Array): { name: string; data: Uint8Array } | null {
  // nanotar reads `.buffer` from its start: hand it a copy that holds exactly these bytes.
  const [file] = parseTar(tar.slice(), { filter: (entry) => entry.type === 'file' })
  if (!file) return null
  return { name: file.name.split('/').pop() || file.name, data: file.data ?? new Uint8Array() }
}

/**
 * Let the browser save bytes under a name.
 *
 * @example
 * ```ts
 * save(new Blob(['hi']), 'hello.txt')
 * ```
 */
export function save(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob)
  const a = document.createElement('a')
  a.href = url
  a.download = name
  document.body.appendChild(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

/**
 * The first regular file of a tar archive (ustar, with pax or GNU long-name headers
 * skipped), or `null`. Enough to hand a single downloaded file to the user as itself rather
 * than as an archive.
 *
 * @example
 * ```ts
 * const file = firstFile(new Uint8Array(await res.arrayBuffer())) // { name: 'notes.txt', data }
 * ```
 */
export function firstFile(tar: Uint8Array): { name: string; data: Uint8Array } | null {
  const text = (from: number, len: number) => {
    const slice = tar.subarray(from, from + len)
    const end = slice.indexOf(0)
    return new TextDecoder().decode(end >= 0 ? slice.subarray(0, end) : slice)
  }
  for (let at = 0; at + 512 <= tar.length; ) {
    const name = text(at, 100)
    if (!name) return null
    const size = parseInt(text(at + 124, 12).trim() || '0', 8)
    const type = String.fromCharCode(tar[at + 156] ?? 0)
    const prefix = text(at + 345, 155)
    const data = at + 512
    if (type === '0' || type === '\0') {
      const full = prefix ? `${prefix}/${name}` : name
      return { name: full.split('/').pop() || full, data: tar.slice(data, data + size) }
    }
    at = data + Math.ceil(size / 512) * 512
  }
  return null
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

/** The file operations' shapes of the container runtime port (`ContainerRuntime.listFiles`, `readFile`, `writeFiles`). */

/** One directory entry as `ContainerRuntime.listFiles` reports it. */
export interface FileEntry {
  name: string
  type: 'file' | 'directory' | 'symlink' | 'other'
  /** Bytes (for a symlink, the length of its target). */
  size: number
  /** Last modification, ISO-8601 UTC. */
  mtime: string
}

/** A directory's entries, sorted by name, at most `maxEntries`. */
export interface DirectoryListing {
  entries: FileEntry[]
  /** True when the directory holds more entries than were listed. */
  truncated: boolean
}

/**
 * Files written in two steps (see `ContainerRuntime.writeFiles`): each `add` streams
 * one file into a staging directory under the root as it arrives; `commit` moves them all
 * into place at once, so a refused or broken upload leaves nothing behind.
 */
export interface FileWrite {
  /** Stream the next file in; resolves its size. A failing `body` rejects with its own error. */
  add(body: AsyncIterable<Uint8Array>): Promise<number>
  /** Move the added files into directory `dir` (created as needed), as `names[i]`. */
  commit(dir: string, names: string[]): Promise<void>
  /** Move the one added file to `path`, or into it as `name` when `path` is a directory; resolves where it went, relative to the root. */
  commitOne(path: string, name: string): Promise<string>
  /** Drop what was staged; nothing once committed. */
  discard(): Promise<void>
}

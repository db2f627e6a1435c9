import { readdirSync, readFileSync } from 'node:fs'

/** The parent pid in a `/proc/<pid>/stat` line (the command may hold spaces and parentheses). */
function parentOf(stat: string): number {
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

/** Every process's children, read from `/proc` (empty where there is none: not Linux). */
function processTree(): Map<number, number[]> {
  const children = new Map<number, number[]>()
  let entries: string[] = []
  try {
    entries = readdirSync('/proc')
  } catch {
    return children
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue
    try {
      const ppid = parentOf(readFileSync(`/proc/${name}/stat`, 'utf8'))
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)])
    } catch {
      // Gone meanwhile.
    }
  }
  return children
}

/**
 * The pids of every process below `root` (children, their children...).
 *
 * @example
 * ```ts
 * descendants(process.pid) // [4242, 4250] (Claude Code and the shell it started)
 * ```
 */
export function descendants(root: number = process.pid, tree: Map<number, number[]> = processTree()): number[] {
  const out: number[] = []
  const queue = [root]
  while (queue.length) {
    for (const child of tree.get(queue.shift()!) ?? []) {
      out.push(child)
      queue.push(child)
    }
  }
  return out
}

/**
 * SIGKILL every process below this one's children: after an interrupt Claude Code did not
 * honour in time, what its tools started must not outlive the turn (a `sleep 30`
 * reparented to the container's init would keep running). Claude Code itself (a child) is
 * left to the SDK's abort, which lets it write its session out. Returns how many were
 * signalled.
 *
 * @example
 * ```ts
 * killToolProcesses()
 * ```
 */
export function killToolProcesses(): number {
  const tree = processTree()
  let n = 0
  for (const child of tree.get(process.pid) ?? []) {
    for (const pid of descendants(child, tree)) {
      try {
        process.kill(pid, 'SIGKILL')
        n++
      } catch {
        // Already gone.
      }
    }
  }
  return n
}

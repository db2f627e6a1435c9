/**
 * The search the credential tests run inside a task's container (and on this machine, for
 * the `local` runtime's host processes): every form of a secret an agent could print,
 * looked for in files, `/proc/<pid>/environ` and `/proc/<pid>/cmdline`.
 */
import { spawnSync } from 'node:child_process'
import { collectExec, type ContainerRuntime } from '@berth/core'

/** Every form of `value` the search looks for: plain, reversed, base64 (each alignment) and hex. */
export function forms(value: string): string[] {
  const b64 = [0, 1, 2].map((pad) => {
    const text = Buffer.from(`${'\0'.repeat(pad)}${value}`).toString('base64')
    // Drop the characters that also encode the padding or the unknown byte after the value.
    return text.slice(pad ? 4 : 0, -4)
  })
  return [value, [...value].reverse().join(''), ...b64, Buffer.from(value).toString('hex')]
}

/**
 * A search run as root inside the container, in Node (every image Berth runs has it): the
 * forms come on stdin (never on a command line or in an environment), the answer is which
 * were found where, and the value of `ANTHROPIC_API_KEY` the agent's processes hold. With
 * `memory`, it also reads the writable memory of every process it may (`/proc/<pid>/mem`).
 */
export const SEARCH = String.raw`
const fs = require('fs'), path = require('path')
let input = ''
process.stdin.on('data', (d) => (input += d)).on('end', () => {
  const { needles, skip, files: scanFiles, memory } = JSON.parse(input)
  const found = []
  let token = null
  const tokens = []
  const check = (where, text) => { for (const n of needles) if (text.includes(n.form)) found.push({ where, name: n.name }) }
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid)) {
    for (const f of ['environ', 'cmdline']) {
      let text = ''
      try { text = fs.readFileSync('/proc/' + pid + '/' + f, 'latin1') } catch { continue }
      check('/proc/' + pid + '/' + f, text)
      const m = f === 'environ' && /(?:^|\0)ANTHROPIC_API_KEY=([^\0]*)/.exec(text)
      if (m) { token = m[1]; tokens.push(m[1]) }
    }
  }
  let files = 0
  const walk = (dir) => {
    let entries = []
    try { entries = fs.readdirSync(dir, { withFileTypes: true }) } catch { return }
    for (const e of entries) {
      const p = path.join(dir, e.name)
      if (skip.includes(p)) continue
      if (e.isDirectory()) walk(p)
      else if (e.isFile()) {
        try {
          if (fs.statSync(p).size > 64 * 1024 * 1024) continue
          check(p, fs.readFileSync(p, 'latin1'))
          files++
        } catch {}
      }
    }
  }
  if (scanFiles) walk('/')
  // The writable memory of every process this user may read (an agent can read its own
  // user's processes, Claude Code's included): strings as one byte or two per character.
  let regions = 0
  const seen = new Set()
  const chunk = Buffer.alloc(16 * 1024 * 1024)
  const wide = needles.map((n) => ({ name: n.name, latin1: Buffer.from(n.form, 'latin1'), utf16: Buffer.from(n.form, 'utf16le') }))
  const overlap = Math.max(0, ...wide.map((n) => n.utf16.length))
  for (const pid of memory ? fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid) : []) {
    let maps = '', fd
    try { maps = fs.readFileSync('/proc/' + pid + '/maps', 'latin1'); fd = fs.openSync('/proc/' + pid + '/mem', 'r') } catch { continue }
    for (const line of maps.split('\n')) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) rw/.exec(line)
      if (!m) continue
      const end = parseInt(m[2], 16)
      regions++
      for (let at = parseInt(m[1], 16); at < end; at += chunk.length - overlap) {
        let n = 0
        try { n = fs.readSync(fd, chunk, 0, Math.min(chunk.length, end - at), at) } catch { break }
        const bytes = chunk.subarray(0, n)
        for (const w of wide) {
          const key = pid + ' ' + w.name
          if (!seen.has(key) && (bytes.includes(w.latin1) || bytes.includes(w.utf16))) {
            seen.add(key)
            found.push({ where: '/proc/' + pid + '/mem', name: w.name })
          }
        }
        if (n < chunk.length) break
      }
    }
    fs.closeSync(fd)
  }
  process.stdout.write(JSON.stringify({ found, token, tokens, files, regions }))
})`

export interface SearchAnswer {
  found: { where: string; name: string }[]
  /** The last `ANTHROPIC_API_KEY` seen in an environment, and all of them (a host search sees other sandboxes too). */
  token: string | null
  tokens?: string[]
  files: number
  /** How many writable memory regions were read (a `memory` search). */
  regions?: number
}

/** The search over this machine's processes (the `local` runtime's sandboxes are host processes). */
export function hostSearch(needles: { name: string; form: string }[]): SearchAnswer {
  const run = spawnSync(process.execPath, ['-e', SEARCH], {
    input: JSON.stringify({ needles, skip: [], files: false }),
    encoding: 'utf8',
  })
  if (run.status !== 0) throw new Error(run.stderr)
  return JSON.parse(run.stdout) as SearchAnswer
}

/** What to look for, and where: `skip` names directories left out of the file walk. */
export interface SearchQuery {
  needles: { name: string; form: string }[]
  skip: string[]
  files: boolean
  /** Also read the writable memory of every process the searching user may read. */
  memory?: boolean
}

/** {@link SEARCH} inside a container, as `user` (root reads every file; the agent's user reads its own processes). */
export async function searchContainer(
  runtime: ContainerRuntime,
  containerId: string,
  user: string | undefined,
  query: SearchQuery,
): Promise<SearchAnswer> {
  const out = await collectExec(
    await runtime.exec(containerId, {
      cmd: ['node', '-e', SEARCH],
      ...(user && { user }),
      stdin: JSON.stringify(query),
    }),
  )
  if (out.exitCode !== 0) throw new Error(`the search failed: ${out.stderr}`)
  return JSON.parse(out.stdout) as SearchAnswer
}

/** Kills every `sleep <seconds>` process it may see (the agent's long Bash call, once the search is done). */
const END_SLEEP = String.raw`
const fs = require('fs')
const want = 'sleep\0' + process.argv[1] + '\0'
for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
  try { if (fs.readFileSync('/proc/' + pid + '/cmdline', 'latin1') === want) process.kill(Number(pid), 'SIGKILL') } catch {}
}`

/**
 * End the agent's `sleep <seconds>` (an unusual number, so nothing else matches): in the
 * container as root, or on this machine for the `local` runtime (`containerId` null),
 * whose sandboxes are host processes. The Bash call then returns and the task ends.
 */
export async function endSleep(runtime: ContainerRuntime, containerId: string | null, seconds: number): Promise<void> {
  if (containerId === null) {
    spawnSync(process.execPath, ['-e', END_SLEEP, String(seconds)])
    return
  }
  await collectExec(await runtime.exec(containerId, { cmd: ['node', '-e', END_SLEEP, String(seconds)], user: 'root' }))
}

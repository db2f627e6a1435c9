import { createHash } from 'node:crypto'
import { validationError, type ValidationIssue, type McpServer, SECRET_MASK } from '@berth/contract'
import type { Cipher } from '../ports/cipher.js'

/**
 * MCP server definitions carry credentials in `env` (stdio) and `headers` (http/sse):
 * tokens, `Authorization`. Every value of those maps is a secret, handled like an
 * integration's secret fields: encrypted at rest, `••••••••` in every response, and a
 * `••••••••` sent back on update keeps the value stored under the same server and name.
 */
type Servers = Record<string, McpServer>

const SEALED = 'enc:'

function mapValues(server: McpServer, fn: (value: string, key: string) => string): McpServer {
  if (server.type === 'stdio') return server.env ? { ...server, env: mapRecord(server.env, fn) } : server
  return server.headers ? { ...server, headers: mapRecord(server.headers, fn) } : server
}

function mapRecord(m: Record<string, string>, fn: (value: string, key: string) => string): Record<string, string> {
  return Object.fromEntries(Object.entries(m).map(([k, x]) => [k, fn(x, k)]))
}

function secretsOf(server: McpServer | undefined): Record<string, string> | undefined {
  if (!server) return undefined
  return server.type === 'stdio' ? server.env : server.headers
}

/**
 * One server as stored: its `env`/`headers` values encrypted; a mask keeps the value
 * `stored` has under the same name, or is a 400 naming `field` when none is stored.
 *
 * @example
 * ```ts
 * sealServer({ type: 'http', url, headers: { Authorization: 'Bearer t' } }, cipher, undefined, 'server')
 * ```
 */
export function sealServer(server: McpServer, cipher: Cipher, stored: McpServer | undefined, field: string): McpServer {
  const issues: ValidationIssue[] = []
  const old = secretsOf(stored)
  const sealed = mapValues(server, (value, key) => {
    if (value !== SECRET_MASK) return cipher.encrypt(value)
    const kept = old && stored?.type === server.type && Object.hasOwn(old, key) ? old[key] : undefined
    if (kept === undefined)
      issues.push({
        location: 'body',
        path: `${field}.${server.type === 'stdio' ? 'env' : 'headers'}.${key}`,
        message: `${SECRET_MASK} keeps a stored value, but none is stored here: send the value`,
      })
    return kept ?? ''
  })
  if (issues.length) throw validationError(issues)
  return sealed
}

/**
 * Every server of a profile's `mcp_servers` as stored (see {@link sealServer}).
 *
 * @example
 * ```ts
 * sealServers({ gh: { type: 'stdio', command: 'gh-mcp', env: { GH_TOKEN: 'ghp_…' } } }, cipher, undefined, 'mcp_servers')
 * ```
 */
export function sealServers(servers: Servers, cipher: Cipher, stored: Servers | undefined, field: string): Servers {
  return Object.fromEntries(
    Object.entries(servers).map(([name, s]) => [name, sealServer(s, cipher, stored?.[name], `${field}.${name}`)]),
  )
}

/**
 * A server as responses show it: `env`/`headers` values masked.
 *
 * @example
 * ```ts
 * maskServer({ type: 'http', url, headers: { Authorization: 'enc:v1:…' } }).headers // { Authorization: '••••••••' }
 * ```
 */
export function maskServer(server: McpServer): McpServer {
  return mapValues(server, () => SECRET_MASK)
}

/**
 * Every server of a `mcp_servers` map masked.
 *
 * @example
 * ```ts
 * maskServers(profile.mcp_servers)
 * ```
 */
export function maskServers(servers: Servers): Servers {
  return Object.fromEntries(Object.entries(servers).map(([name, s]) => [name, maskServer(s)]))
}

/**
 * A stored server with its values decrypted, for the runner only (values stored before
 * encryption existed pass as they are).
 *
 * @example
 * ```ts
 * openServer(stored, cipher).headers // { Authorization: 'Bearer t' }
 * ```
 */
export function openServer(server: McpServer, cipher: Cipher | undefined): McpServer {
  return mapValues(server, (value) => {
    if (!value.startsWith(SEALED)) return value
    if (!cipher) throw new Error('an MCP server credential is encrypted and no cipher was given to open it')
    return cipher.decrypt(value)
  })
}

/**
 * The plaintext credential values of a server (for redaction).
 *
 * @example
 * ```ts
 * serverSecrets(openServer(stored, cipher)) // ['Bearer t']
 * ```
 */
export function serverSecrets(server: McpServer): string[] {
  return Object.values(secretsOf(server) ?? {})
}

/**
 * The servers a run gets: the profile's `mcp_servers`, then the caller's tools in scope (a
 * tool wins over a profile server of the same name), each opened with `cipher`.
 *
 * @example
 * ```ts
 * openServers(profile.mcp_servers, await tools.forProfile(owner, profile.id), cipher)
 * ```
 */
export function openServers(
  profileServers: Servers,
  tools: { name: string; server: McpServer }[],
  cipher: Cipher | undefined,
): Servers {
  const servers = Object.fromEntries(Object.entries(profileServers).map(([name, s]) => [name, openServer(s, cipher)]))
  for (const t of tools) servers[t.name] = openServer(t.server, cipher)
  return servers
}

/**
 * The placeholder that stands for header `header` of MCP server `server` inside a
 * container. Derived from the two names only, so the runner's input and the egress
 * proxy's grant agree on it without sharing any state, and it reveals nothing of the value.
 *
 * @example
 * ```ts
 * mcpHeaderPlaceholder('docs', 'Authorization') // 'berth_brokered_mcp_<16 hex digits>'
 * ```
 */
export function mcpHeaderPlaceholder(server: string, header: string): string {
  const digest = createHash('sha256').update(`${server}\0${header}`).digest('hex')
  return `berth_brokered_mcp_${digest.slice(0, 16)}`
}

/** A remote MCP server's header value as the egress proxy adds it, for the server's host only. */
export interface BrokeredMcpHeader {
  placeholder: string
  value: string
  hosts: string[]
}

/**
 * Remote (`http`/`sse`) servers with every header value replaced by its placeholder (see
 * {@link mcpHeaderPlaceholder}), and what the egress proxy puts back: each value, for the
 * host of its server's URL. Stdio servers pass unchanged: they run inside the container
 * and need their `env` there.
 *
 * @example
 * ```ts
 * const { servers, brokered } = brokerMcpHeaders({ docs: { type: 'http', url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer t' } } })
 * servers.docs.headers // { Authorization: 'berth_brokered_mcp_…' }
 * brokered // [{ placeholder: 'berth_brokered_mcp_…', value: 'Bearer t', hosts: ['mcp.example.com'] }]
 * ```
 */
export function brokerMcpHeaders(servers: Servers): { servers: Servers; brokered: BrokeredMcpHeader[] } {
  const brokered: BrokeredMcpHeader[] = []
  const out: Servers = {}
  for (const [name, server] of Object.entries(servers)) {
    if (server.type === 'stdio' || !server.headers) {
      out[name] = server
      continue
    }
    const host = new URL(server.url).hostname.replace(/^\[(.*)\]$/, '$1')
    out[name] = mapValues(server, (value, header) => {
      const placeholder = mcpHeaderPlaceholder(name, header)
      brokered.push({ placeholder, value, hosts: [host] })
      return placeholder
    })
  }
  return { servers: out, brokered }
}

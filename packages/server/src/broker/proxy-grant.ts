import type { EgressPolicy, ProxyGrant } from '@berth/core'
import { answerHeaders, HOP_BY_HOP } from '../upstream-answer.js'

/**
 * What one task may do through the egress proxy (core's `RunGrants.proxy` answers it from
 * the token its container presents): where it may connect (its {@link EgressPolicy},
 * applied by host name), which placeholders are replaced for which hosts (exact names or
 * `*.example.com`), and the Git accounts whose token is added (`host[:port]`, 443 when left out).
 */
export type { ProxyGrant }

/** What the proxy adds to the requests of one destination. */
export interface Injection {
  /** Placeholders replaced in every header value, and their values. */
  secrets: { placeholder: string; value: string }[]
  /** The `Authorization` header a request without one gets (a Git account's Basic auth). */
  authorization?: string
  /** Extra roots for the destination's certificate (the Git account's private CA). */
  caPem?: string
  /** What answers must not show the agent, and what stands in for it (an upstream may echo a request's headers). */
  redactions: [secret: string, shown: string][]
}

/**
 * True when `host` is `pattern` (case-insensitive) or, for `*.example.com`, a name below
 * `example.com` at any depth (never `example.com` itself).
 */
export function hostMatches(pattern: string, host: string): boolean {
  const p = normalHost(pattern)
  const h = normalHost(host)
  if (p.startsWith('*.')) return h.endsWith(p.slice(1)) && h.length > p.length - 1
  return p === h
}

/** A secret's host: `name`, `*.domain` or an address, on any port, or `…:port` on that port only. */
export function secretHostMatches(pattern: string, host: string, port: number): boolean {
  const withPort = /^(.*[^:]):(\d{1,5})$/.exec(pattern)
  // A bare IPv6 address has colons of its own: only `[addr]:port` names a port for it.
  if (withPort && !withPort[1]!.includes(':')) return Number(withPort[2]) === port && hostMatches(withPort[1]!, host)
  return hostMatches(pattern, host)
}

/** A host name as compared: lower case, no trailing dot, no IPv6 brackets. */
export function normalHost(host: string): string {
  return host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
}

/**
 * What the proxy adds for `host:port`. Git credentials only go over TLS: the token then
 * travels encrypted from the proxy to the account's host, never in clear.
 */
export function injectionFor(grant: ProxyGrant, host: string, port: number, tls: boolean): Injection {
  const secrets = grant.brokered
    .filter((s) => s.placeholder !== '' && s.hosts.some((pattern) => secretHostMatches(pattern, host, port)))
    .map(({ placeholder, value }) => ({ placeholder, value }))
  const redactions = secrets.map((s): [string, string] => [s.value, s.placeholder])
  const account = tls ? grant.git.find((g) => gitHostMatches(g.host, host, port)) : undefined
  if (!account) return { secrets, redactions }
  const basic = Buffer.from(`${account.username}:${account.token}`).toString('base64')
  redactions.push([basic, GIT_REDACTED], [account.token, GIT_REDACTED])
  return { secrets, authorization: `Basic ${basic}`, caPem: account.ca_pem, redactions }
}

/** What an answer shows in place of a Git token. */
export const GIT_REDACTED = 'berth_redacted_git_token'

/** True when the proxy has something to add for this destination (so it must read the requests). */
export function needsInjection(injection: Injection): boolean {
  return injection.secrets.length > 0 || injection.authorization !== undefined
}

function gitHostMatches(account: string, host: string, port: number): boolean {
  const bracketed = account.match(/^\[([^\]]+)\](?::(\d+))?$/)
  const plain = account.match(/^([^:]+)(?::(\d+))?$/)
  const parts = bracketed ?? plain
  if (!parts) return false
  const accountPort = parts[2] === undefined ? 443 : Number(parts[2])
  return accountPort === port && normalHost(parts[1]!) === normalHost(host)
}

// Headers that belong to one hop (RFC 9110 section 7.6.1) and are never forwarded, plus
// the proxy's own credential and `Expect`. Message framing is left to Node, which sets it again.
const NOT_FORWARDED = new Set([...HOP_BY_HOP, 'expect'])

/**
 * The request headers to forward, as Node's flat `rawHeaders` list: hop-by-hop headers
 * dropped (an upgrade keeps `Connection` and `Upgrade`), every placeholder of `injection`
 * replaced in every value, and the Git `Authorization` added when the request has none.
 */
export function rewriteRequestHeaders(raw: string[], injection: Injection, upgrade = false): string[] {
  const out: string[] = []
  let hasAuthorization = false
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!
    if (dropped(name, upgrade)) continue
    if (name.toLowerCase() === 'authorization') hasAuthorization = true
    out.push(name, replacePlaceholders(raw[i + 1]!, injection.secrets))
  }
  if (!hasAuthorization && injection.authorization) out.push('Authorization', injection.authorization)
  return out
}

/**
 * Response headers to pass back, through the one copy every proxy makes ({@link answerHeaders}:
 * hop-by-hop ones dropped, as Node frames the body again, and any name or value Node would
 * refuse), with any injected value an upstream echoes in a header shown as its placeholder
 * again. Bodies are passed as they come: an allowed host that echoes its request's headers in
 * a body can show the value to the agent, which is why a secret lists the hosts it may reach.
 */
export function responseHeaders(raw: string[], injection?: Injection, upgrade = false): string[] {
  const redactions = injection?.redactions ?? []
  return answerHeaders(raw, { upgrade, value: (v) => replaceAll(v, redactions) })
}

function dropped(name: string, upgrade: boolean): boolean {
  const lower = name.toLowerCase()
  return NOT_FORWARDED.has(lower) && !(upgrade && (lower === 'connection' || lower === 'upgrade'))
}

function replacePlaceholders(value: string, secrets: Injection['secrets']): string {
  return replaceAll(
    value,
    secrets.map((s): [string, string] => [s.placeholder, s.value]),
  )
}

function replaceAll(value: string, pairs: [string, string][]): string {
  let out = value
  for (const [from, to] of pairs) if (from !== '') out = out.split(from).join(to)
  return out
}

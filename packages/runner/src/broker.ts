import { readFileSync, writeFileSync } from 'node:fs'
import type { AddressInfo, Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { RunnerInput } from '@berth/contract'
import { forwarder, type ModelGate } from './gate.js'
import { gatewayEnv } from './provider-env.js'

/** Where the agent's tools reach the broker, and the trust store that accepts its proxy. */
export interface BrokerAccess {
  /** `http://127.0.0.1:<port>`: the model gateway, for `ANTHROPIC_BASE_URL`. */
  gatewayUrl: string
  /** `http://berth:<token>@127.0.0.1:<port>`: the egress proxy, or null without one. */
  proxyUrl: string | null
  /** The deployment CA (PEM file) and a bundle of the system's roots plus it, or null without a CA. */
  ca: { file: string; bundle: string } | null
  close(): Promise<void>
}

/** The system trust bundles of the usual distributions, first found wins. */
const SYSTEM_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/cert.pem']

/**
 * Open the broker to the agent: a loopback port forwarded to each of the broker's unix
 * sockets (Claude Code, curl, git and the rest speak TCP; the sockets work under every
 * network policy, `none` included; the gateway's through `gate` when given), and a CA bundle with the deployment's CA, for the
 * variables that replace the system's (`SSL_CERT_FILE` and friends).
 *
 * @example
 * ```ts
 * const access = await openBroker(input.broker)
 * env.ANTHROPIC_BASE_URL = access.gatewayUrl
 * ```
 */
export async function openBroker(broker: NonNullable<RunnerInput['broker']>, gate?: ModelGate): Promise<BrokerAccess> {
  const servers: Server[] = []
  const forward = async (socketPath: string, through?: ModelGate) => {
    const server = await forwarder(socketPath, through)
    servers.push(server)
    return (server.address() as AddressInfo).port
  }
  const gatewayPort = await forward(broker.gateway_socket, gate)
  const proxyPort = broker.proxy_socket ? await forward(broker.proxy_socket) : null
  return {
    gatewayUrl: `http://127.0.0.1:${gatewayPort}`,
    proxyUrl: proxyPort === null ? null : `http://berth:${encodeURIComponent(broker.token)}@127.0.0.1:${proxyPort}`,
    ca: broker.ca_file ? { file: broker.ca_file, bundle: caBundle(broker.ca_file) } : null,
    close: () => Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r())))).then(() => {}),
  }
}

/** The system's roots plus the deployment CA, written once per run where the agent may read it. */
function caBundle(caFile: string): string {
  const ca = readFileSync(caFile, 'utf8')
  let system = ''
  for (const file of SYSTEM_BUNDLES) {
    try {
      system = readFileSync(file, 'utf8')
      break
    } catch {
      // not this distribution's path
    }
  }
  const bundle = join(tmpdir(), `berth-ca-bundle-${process.pid}.pem`)
  writeFileSync(bundle, `${system.trimEnd()}\n${ca.trimEnd()}\n`, { mode: 0o644 })
  return bundle
}

/**
 * The agent's environment for the broker: the model gateway as its endpoint with the run's
 * token as its key (for the credential's provider, `provider-env.ts`; none for the offline
 * model), the proxy for HTTP(S) (loopback excluded), and the CA in every trust variable
 * the common tools read.
 *
 * @example
 * ```ts
 * Object.assign(env, brokerEnv(access, input.broker.token, input.model))
 * ```
 */
export function brokerEnv(
  access: BrokerAccess,
  token: string,
  model: RunnerInput['model'] | null,
): Record<string, string> {
  const env: Record<string, string> = model ? gatewayEnv(model, access.gatewayUrl, token) : {}
  if (access.proxyUrl) {
    for (const k of ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy']) env[k] = access.proxyUrl
    for (const k of ['NO_PROXY', 'no_proxy']) env[k] = '127.0.0.1,localhost,::1'
  }
  if (access.ca) {
    env.NODE_EXTRA_CA_CERTS = access.ca.file
    for (const k of ['SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'GIT_SSL_CAINFO'])
      env[k] = access.ca.bundle
  }
  return env
}

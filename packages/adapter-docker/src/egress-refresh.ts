import { type FirewallOptions, hostNetworks, installBridgeRules } from './firewall.js'

/** How often the host's networks are read again while `public` bridges exist (ms). */
export const HOST_NETWORKS_REFRESH_MS = 5000

/** A `public` bridge ruled by this server, and the host networks its rules last refused (JSON). */
export interface PublicBridge {
  gateway: string | null
  refused: string
}

/**
 * Keeps `public` refusing the host's own networks while the host joins or leaves one (a
 * VPN comes up, an engine adds a bridge): every few seconds the interfaces are read again
 * and, when they changed, each `public` bridge's chain is rewritten. The rules sit on the
 * host per bridge, so the rewrite holds for its running containers and for new ones alike.
 *
 * @example
 * ```ts
 * const refresher = hostNetworkRefresher(new Map([['brbabc', { gateway: '10.89.0.1', refused: '[]' }]]))
 * refresher.start()
 * refresher.stop()
 * ```
 */
export function hostNetworkRefresher(publics: Map<string, PublicBridge>, firewall: FirewallOptions = {}) {
  let timer: NodeJS.Timeout | null = null
  let running: Promise<void> | null = null
  const refresh = async () => {
    const host = hostNetworks()
    const key = JSON.stringify(host)
    for (const [bridge, state] of publics) {
      if (state.refused === key) continue
      await installBridgeRules(
        { bridge, gateway: state.gateway, policy: 'public', allow: [], hostNetworks: host },
        firewall,
      )
      state.refused = key
    }
  }
  return {
    /** Start polling (once; the timer never keeps the process alive). */
    start(): void {
      if (timer) return
      timer = setInterval(() => {
        // A failed rewrite is tried again at the next tick; a container start re-installs the rules too.
        running ??= refresh()
          .catch(() => {})
          .finally(() => (running = null))
      }, firewall.refreshMs ?? HOST_NETWORKS_REFRESH_MS)
      timer.unref()
    },
    stop(): void {
      if (timer) clearInterval(timer)
      timer = null
    },
  }
}

import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'

/** Where a forwarder's connections go: a unix socket's path, or a TCP port on loopback. */
export type ForwardTarget = string | { host: string; port: number }

/**
 * The agent's way to its model, shut between a living session's tasks. Between two tasks
 * no model call belongs to any task (none would be metered or allowed by the gateway), but
 * Claude Code starts a turn of its own when a background task it runs ends; shut, the gate
 * holds that turn's connection (and closes the ones left open) until the next task opens
 * it, so the agent takes the notification up at the start of that task, on its account.
 *
 * @example
 * ```ts
 * const gate = new ModelGate()
 * const server = await forwarder({ host: '127.0.0.1', port: 4000 }, gate)
 * gate.shut() // between tasks
 * gate.open() // the next task's prompt came
 * ```
 */
export class ModelGate {
  private shutNow = false
  private readonly held: (() => void)[] = []
  private readonly live = new Set<Socket>()

  /** Whether connections are held now. */
  get isShut(): boolean {
    return this.shutNow
  }

  /** Hold new connections, and close those open (keep-alive connections would pass the gate). */
  shut(): void {
    this.shutNow = true
    for (const s of this.live) s.destroy()
  }

  /** Let held and new connections through. */
  open(): void {
    this.shutNow = false
    for (const go of this.held.splice(0)) go()
  }

  /** A connection came: `go` pipes it, now or once the gate opens. */
  admit(client: Socket, go: () => void): void {
    this.live.add(client)
    client.once('close', () => this.live.delete(client))
    if (!this.shutNow) {
      go()
      return
    }
    this.held.push(() => {
      if (!client.destroyed) go()
    })
  }
}

/**
 * A TCP listener on 127.0.0.1 (a free port) whose every connection is piped to `target`
 * (through `gate` when given). Closing it ends the connections it holds.
 *
 * @example
 * ```ts
 * const server = await forwarder('/run/berth/gateway.sock')
 * const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
 * ```
 */
export function forwarder(target: ForwardTarget, gate?: ModelGate): Promise<Server> {
  const open = new Set<Socket>()
  const server = createServer((client) => {
    open.add(client)
    client.once('close', () => open.delete(client))
    // Until piped, a client's error (a reset) has nothing else to end.
    client.on('error', () => client.destroy())
    const go = () => {
      const upstream = typeof target === 'string' ? connect(target) : connect(target.port, target.host)
      client.pipe(upstream).pipe(client)
      // Either side failing ends both: the client sees a closed connection, as with a refused one.
      client.on('error', () => upstream.destroy())
      upstream.on('error', () => client.destroy())
      client.once('close', () => upstream.destroy())
    }
    if (gate) gate.admit(client, go)
    else go()
  })
  const close = server.close.bind(server)
  server.close = (cb) => {
    for (const c of open) c.destroy()
    return close(cb)
  }
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve(server))
  })
}

/** `http://127.0.0.1:<port>` of a listening forwarder. */
export function urlOf(server: Server): string {
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/**
 * The channel conformance suite: the delivery contract every notification channel keeps
 * (see `Channel` in `@berth/core`), checked against a local fake of its third party.
 */
import { randomBytes } from 'node:crypto'
import { createServer as createHttpServer } from 'node:http'
import { createServer, type Server, type Socket } from 'node:net'
import type { Channel, ChannelIntegration, DeliveryOutcome, OutgoingNotification } from '@berth/core'
import { afterAll, describe, expect, it } from 'vitest'

/** A channel with the integration config that delivers through it. */
export interface ChannelSetup {
  channel: Channel
  config: Record<string, unknown>
}

/** A channel against a running fake of its third party. */
export interface ChannelPeer extends ChannelSetup {
  /** What the third party received so far, one string per delivery (the suite looks for the notification in it). */
  received(): string[] | Promise<string[]>
  close(): Promise<void>
}

/** Where {@link ChannelConformanceOptions.pointedAt} points a channel. */
export interface PeerAddress {
  host: string
  port: number
  /** `http://host:port` */
  url: string
}

export interface ChannelConformanceOptions {
  /** The channel against a fake that accepts the delivery. */
  working(): Promise<ChannelPeer>
  /** The third party refuses the delivery for good (a 4xx answer, an SMTP 5xx reply). */
  refusing(): Promise<ChannelPeer>
  /** The third party fails for now (a 5xx or 429 answer, an SMTP 4xx reply). */
  failing(): Promise<ChannelPeer>
  /** The third party refuses the grant's token: an OAuth-connected channel answers `unauthorized`. */
  unauthorized?(): Promise<ChannelPeer>
  /**
   * A channel of the same kind pointed at `address`, with `timeoutMs` per attempt. The suite
   * points it at a closed port, at a peer that accepts and never answers, and at a peer that
   * echoes the whole request (headers, path, body) in its error answer.
   */
  pointedAt(address: PeerAddress, timeoutMs: number): ChannelSetup | Promise<ChannelSetup>
  /** What the third party speaks: `http` (default) or `smtp` (for the echoing peer). */
  protocol?: 'http' | 'smtp'
  /** Values that must never appear in an outcome's `error` (tokens in the config, the deployment's credentials). */
  secrets: string[]
  /**
   * The event delivered: `task.completed` (default; the third party must receive the task
   * id) or `integration.test` (a channel that only checks its grant, like banking).
   */
  event?: 'task.completed' | 'integration.test'
}

const INTEGRATION: ChannelIntegration = {
  id: 'integration_conformance',
  owner_id: 'usr_conformance',
  type: 'conformance',
}

/** A task notification with a unique task id (the marker the third party must receive). */
function notification(event: 'task.completed' | 'integration.test'): { n: OutgoingNotification; marker: string } {
  const marker = `task_conf${randomBytes(6).toString('hex')}`
  const task = { task_id: marker, status: 'completed', result: { text: `result of ${marker}` }, error: null }
  const payload =
    event === 'task.completed'
      ? { event, task, at: new Date(0).toISOString() }
      : { event, at: new Date(0).toISOString() }
  return {
    marker,
    n: {
      notification_id: `notification_${marker}`,
      event,
      payload,
      body: JSON.stringify(payload),
      timestamp: 1_700_000_000,
      attempt: 1,
    },
  }
}

/** A TCP server on 127.0.0.1 whose connections are handled by `onConnection`; closing drops them. */
async function listen(
  onConnection: (socket: Socket) => void,
): Promise<{ address: PeerAddress; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  const server: Server = createServer((s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
    s.on('error', () => {})
    onConnection(s)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  return {
    address: { host: '127.0.0.1', port, url: `http://127.0.0.1:${port}` },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy()
        server.close(() => r())
      }),
  }
}

/** A port nothing listens on (taken, then released). */
async function closedAddress(): Promise<PeerAddress> {
  const peer = await listen(() => {})
  await peer.close()
  return peer.address
}

/** An HTTP peer that answers every request 400 with the whole request in the usual error fields. */
async function httpEcho(): Promise<{ address: PeerAddress; close(): Promise<void> }> {
  const server = createHttpServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (c: string) => (body += c))
    req.on('end', () => {
      const echo = `${req.method} ${req.url} ${JSON.stringify(req.headers)} ${body}`
      res.writeHead(400, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ ok: false, error: echo, error_description: echo, description: echo, message: echo }))
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  return {
    address: { host: '127.0.0.1', port, url: `http://127.0.0.1:${port}` },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}

/** An SMTP peer that offers AUTH, then refuses every command with the command echoed in its reply. */
function smtpEcho() {
  return listen((s) => {
    s.write('220 echo ESMTP\r\n')
    let buffered = ''
    s.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8')
      for (let i = buffered.indexOf('\r\n'); i >= 0; i = buffered.indexOf('\r\n')) {
        const line = buffered.slice(0, i)
        buffered = buffered.slice(i + 2)
        if (/^(EHLO|HELO)/i.test(line)) s.write('250-echo\r\n250 AUTH PLAIN LOGIN\r\n')
        else if (/^QUIT/i.test(line)) s.end('221 bye\r\n')
        else s.write(`535 5.7.8 refused: ${line}\r\n`)
      }
    })
  })
}

/**
 * Run the channel conformance suite: the same cases against every channel, like the
 * runtime and store suites. Call it from a test file with the channel's fakes; it registers
 * a vitest `describe` block.
 *
 * Covered: a delivery reaches the third party once and is `ok`; a refusal is a failure not
 * retried; a transient provider error is retried; a refused token is `unauthorized` (for
 * OAuth-connected channels); an unreachable third party and one that never answers are
 * retryable failures, never a throw; no outcome's `error` repeats a secret, even when the
 * third party echoes the request back.
 *
 * @example
 * ```ts
 * channelConformanceSuite('webhook', {
 *   working: async () => { const r = await startReceiver(); return { channel, config: { url: r.url, secret }, received: () => r.received.map((x) => x.body), close: r.close } },
 *   refusing: …, failing: …,
 *   pointedAt: ({ url }, timeoutMs) => ({ channel: webhookChannel({ allowPrivate: true, timeoutMs }), config: { url, secret } }),
 *   secrets: [secret],
 * })
 * ```
 */
export function channelConformanceSuite(name: string, opts: ChannelConformanceOptions): void {
  const event = opts.event ?? 'task.completed'
  const cleanup: (() => Promise<void>)[] = []
  const using = async <T extends { close(): Promise<void> }>(p: Promise<T>): Promise<T> => {
    const peer = await p
    cleanup.push(() => peer.close())
    return peer
  }
  /** One attempt; a throw fails the case (a channel never throws). */
  const attempt = async (setup: ChannelSetup): Promise<DeliveryOutcome> => {
    const out = await setup.channel.deliver(setup.config, notification(event).n, INTEGRATION)
    expect(typeof out.ok).toBe('boolean')
    return out
  }
  const expectFailure = (out: DeliveryOutcome) => {
    if (out.ok) throw new Error(`expected a failed delivery, got ${JSON.stringify(out)}`)
    expect(typeof out.error).toBe('string')
    expect(out.error.length).toBeGreaterThan(0)
    for (const secret of opts.secrets) expect(out.error).not.toContain(secret)
    return out
  }

  describe(`Channel conformance: ${name}`, () => {
    afterAll(async () => {
      await Promise.all(cleanup.map((c) => c()))
    })

    it('delivers one notification: ok, and the third party received it once', async () => {
      const peer = await using(opts.working())
      const before = (await peer.received()).length
      const { n, marker } = notification(event)
      const out = await peer.channel.deliver(peer.config, n, INTEGRATION)
      expect(out).toMatchObject({ ok: true })
      const received = await peer.received()
      expect(received.length).toBe(before + 1)
      if (event === 'task.completed') expect(received.at(-1)).toContain(marker)
    })

    it('a refusal by the third party is a failure not worth retrying', async () => {
      const out = expectFailure(await attempt(await using(opts.refusing())))
      expect(out.retryable).toBe(false)
    })

    it('a transient provider error (5xx, 429, SMTP 4xx) is a failure worth retrying', async () => {
      const out = expectFailure(await attempt(await using(opts.failing())))
      expect(out.retryable).toBe(true)
    })

    if (opts.unauthorized) {
      const unauthorized = opts.unauthorized
      it('a refused token is `unauthorized` and not retried as is', async () => {
        const out = expectFailure(await attempt(await using(unauthorized())))
        expect(out.unauthorized).toBe(true)
        expect(out.retryable).toBe(false)
      })
    }

    it('an unreachable third party is a retryable failure without a status, not a throw', async () => {
      const out = expectFailure(await attempt(await opts.pointedAt(await closedAddress(), 2_000)))
      expect(out.status).toBeNull()
      expect(out.retryable).toBe(true)
    })

    it('a third party that never answers times out: a retryable failure', async () => {
      const silent = await using(listen(() => {}))
      const out = expectFailure(await attempt(await opts.pointedAt(silent.address, 300)))
      expect(out.retryable).toBe(true)
    })

    it('no error repeats a secret, even when the third party echoes the request back', async () => {
      expect(opts.secrets.length).toBeGreaterThan(0)
      const echo = await using(opts.protocol === 'smtp' ? smtpEcho() : httpEcho())
      expectFailure(await attempt(await opts.pointedAt(echo.address, 2_000)))
    })
  })
}

/**
 * Tracing on for a benchmark's Berth host (`BENCH_TRACING=1`): the orchestrator runs an
 * OTLP sink (reads and drops each export, counts the bytes: its work stays out of the
 * server's CPU), and each Berth host registers an in-process OpenTelemetry SDK before it
 * creates Berth, as the standalone server does: a batch span processor and the OTLP/HTTP
 * exporter, every span sampled. The packages come from `@berth/server`'s dev dependencies.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { loadPackageFile } from './workspace.js'

/** A local OTLP endpoint that accepts and drops every export. */
export interface OtlpSink {
  tracesUrl: string
  /** Export requests and body bytes received so far. */
  received(): { requests: number; bytes: number }
  close(): Promise<void>
}

/**
 * Start the sink on 127.0.0.1.
 *
 * @example
 * ```ts
 * const sink = await startOtlpSink()
 * process.env.BENCH_OTLP_URL = sink.tracesUrl // hosts forked after this export to it
 * ```
 */
export async function startOtlpSink(): Promise<OtlpSink> {
  let requests = 0
  let bytes = 0
  const server = createServer((req, res) => {
    req.on('data', (d: Buffer) => (bytes += d.length))
    req.on('end', () => {
      requests++
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    tracesUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    received: () => ({ requests, bytes }),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}

type Ctor<T = object> = new (...args: never[]) => T

/**
 * Register the SDK in this process, exporting to `tracesUrl`; resolves with its shutdown.
 *
 * @example
 * ```ts
 * const stop = await registerTracing(process.env.BENCH_OTLP_URL!)
 * await stop() // flushes
 * ```
 */
export async function registerTracing(tracesUrl: string): Promise<() => Promise<void>> {
  const mjs = 'dist/index.mjs'
  const [api, sdk, exporter, hooks] = await Promise.all([
    loadPackageFile<{
      context: { setGlobalContextManager(m: object): void }
      propagation: { setGlobalPropagator(p: object): void }
      trace: { setGlobalTracerProvider(p: object): void }
    }>('@opentelemetry/api', mjs),
    loadPackageFile<{ TracerProvider: Ctor<{ shutdown(): Promise<void> }>; BatchSpanProcessor: Ctor }>(
      '@opentelemetry/sdk-trace',
      mjs,
    ),
    loadPackageFile<{ OTLPTraceExporter: Ctor }>('@opentelemetry/exporter-trace-otlp-http', mjs),
    loadPackageFile<{ AsyncLocalStorageContextManager: Ctor<{ enable(): object }> }>(
      '@opentelemetry/context-async-hooks',
      mjs,
    ),
  ])
  const { W3CTraceContextPropagator } = await loadPackageFile<{ W3CTraceContextPropagator: Ctor }>(
    '@opentelemetry/core',
    mjs,
  )
  const make = <T>(C: Ctor<T>, ...args: unknown[]) => new (C as unknown as new (...a: unknown[]) => T)(...args)
  const exporterInstance = make(exporter.OTLPTraceExporter, { url: tracesUrl })
  const provider = make(sdk.TracerProvider, {
    spanProcessors: [make(sdk.BatchSpanProcessor, { exporter: exporterInstance })],
  })
  api.context.setGlobalContextManager(make(hooks.AsyncLocalStorageContextManager).enable())
  api.propagation.setGlobalPropagator(make(W3CTraceContextPropagator))
  api.trace.setGlobalTracerProvider(provider)
  return () => provider.shutdown()
}

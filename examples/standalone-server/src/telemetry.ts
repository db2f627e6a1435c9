/**
 * OpenTelemetry traces for the standalone server: the Node SDK, started before anything
 * else is loaded, when an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); off otherwise, so Berth's spans cost nothing.
 * Everything else comes from the standard `OTEL_*` variables the SDK reads (protocol,
 * headers, sampler, resource attributes, `OTEL_SDK_DISABLED`); the service is named
 * `berth` unless they name it. Traces only: metrics are Prometheus's (`GET /metrics`).
 */
import { NodeSDK } from '@opentelemetry/sdk-node'

const env = process.env
const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT
const named = Boolean(env.OTEL_SERVICE_NAME) || /(^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '')

function start(): NodeSDK {
  const sdk = new NodeSDK({
    ...(!named && { serviceName: 'berth' }),
    instrumentations: [],
    // Only traces go out over OTLP: no metric reader, no log processor.
    metricReaders: [],
    logRecordProcessors: [],
  })
  sdk.start()
  return sdk
}

/** The running SDK (undefined when tracing is off); `shutdown()` flushes the spans not yet sent. */
export const telemetry = endpoint && env.OTEL_SDK_DISABLED !== 'true' ? start() : undefined

/** For the start-up log: where spans go (the host only: an endpoint URL may carry credentials). */
export function telemetryLine(): string {
  if (!telemetry || !endpoint) return 'Traces: off (set OTEL_EXPORTER_OTLP_ENDPOINT to export OpenTelemetry traces)'
  let host = 'the configured endpoint'
  try {
    host = new URL(endpoint).host
  } catch {
    // The SDK reports a malformed endpoint itself.
  }
  return `Traces: OpenTelemetry OTLP to ${host} (${env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf'})`
}

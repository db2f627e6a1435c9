import type { ContainerError } from '@berth/core'
import type Docker from 'dockerode'

/** What the operations of an Engine-API runtime share. */
export interface EngineContext {
  /** Runtime name for errors, e.g. `docker` or `podman`. */
  readonly name: string
  readonly docker: Docker
  /** The engine's address for messages, e.g. `unix:///var/run/docker.sock`. */
  readonly endpoint: string
  /** How often a running exec checks that its container is still alive (ms). */
  readonly watchIntervalMs: number
  /** Map any failure of `op` to a ContainerError with this runtime's context. */
  error(err: unknown, op: string, extra?: Record<string, unknown>): ContainerError
}

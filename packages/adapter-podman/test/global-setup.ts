import { ensureEngines } from '@berth/testkit'

/** Provision (or find) rootful Podman, its API service and the local test image; throws if it cannot. */
export default function setup(): void {
  ensureEngines(['podman'])
}

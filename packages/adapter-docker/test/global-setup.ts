import { ensureEngines } from '@berth/testkit'

/** Provision (or find) Docker and the local test image before the suites run; throws if it cannot. */
export default function setup(): void {
  ensureEngines(['docker'])
}

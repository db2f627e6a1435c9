import { ensureEngines } from '@berth/testkit'

/**
 * The pool suites run against real engines: provision (or find) Podman and Docker and the
 * local test image first. Throws when an engine cannot be made to run: the suites fail
 * loudly, they never skip.
 */
export default function setup(): void {
  ensureEngines(['podman', 'docker'])
}

/**
 * `@berth/runner`: the program that runs inside a task's container (`berth-runner`:
 * `dist/main.js`, a loader, and `dist/runner.cjs`, the program), plus what the server
 * needs to ship it there.
 */
export {
  bundleRunner,
  runnerCommand,
  platformPackage,
  RUNNER_MOUNT,
  type BundleOptions,
  type RunnerBundle,
} from './bundle.js'
export { sharedRunnerBundle, runnerCacheDir, type SharedBundleOptions } from './bundle-cache.js'
export { createRedactor, REDACTED, type Redactor, type StreamRedactor } from './redact.js'
export { parseInput, InputError } from './input.js'
export { setupGitCredentials, type GitCredentials, type GitCredentialSetup } from './git-credentials.js'

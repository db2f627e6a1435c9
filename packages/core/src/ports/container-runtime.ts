/**
 * The `ContainerRuntime` port: everything Berth needs from a container engine. Adapters
 * (`@berth/adapter-docker`, `@berth/adapter-podman`, `@berth/adapter-local`) implement it;
 * core and the server only ever see this interface. Framework-neutral: bytes are
 * `Uint8Array`, streams are web `ReadableStream`s or async iterables.
 */
import type { Isolation } from '@berth/contract'
import type { DirectoryListing, FileWrite } from './container-files.js'

/** A host path bind-mounted, or a named volume mounted, into the container. */
export interface ContainerMount {
  type: 'bind' | 'volume'
  /** Host path (bind, must exist) or volume name (volume, created on first use). */
  source: string
  /** Absolute path inside the container. */
  target: string
  readOnly?: boolean
}

/** Resource limits. Engines enforce them; the `local` runtime cannot (see `capabilities`). */
export interface ResourceLimits {
  /** Hard memory limit in bytes; swap is capped at the same amount. */
  memoryBytes?: number
  /** CPU quota in cores, e.g. `0.5` or `2`. */
  cpus?: number
  /** Maximum number of processes and threads. */
  pids?: number
  /**
   * Size of the filesystem the runtime makes at the spec's `workingDir` (the workspace)
   * when nothing is mounted there; a full one answers writes with ENOSPC. Runtimes that
   * cannot make one (no disk directory configured, a remote engine) ignore it.
   */
  diskBytes?: number
  /** Size of the tmpfs at `/tmp` (it counts against `memoryBytes`, being memory). */
  tmpBytes?: number
}

/**
 * Where a container may connect to, enforced by the engine's network and the host's
 * firewall (never by the agent's good will):
 * - `none`: no network interface but loopback;
 * - `public`: the internet, but no private, loopback, link-local (metadata), CGNAT,
 *   multicast or reserved address (core's `PRIVATE_IPV4_RANGES`/`PRIVATE_IPV6_RANGES`),
 *   and nothing on the host itself;
 * - `allowlist`: only `allow` (TCP to a host name, address or CIDR, on `ports` or all).
 */
export interface EgressPolicy {
  policy: 'none' | 'public' | 'allowlist'
  allow?: { host: string; ports?: number[] }[]
  /** Let `allow` reach private ranges (an operator's choice); otherwise such an entry, or a name resolving to one, fails the create. */
  allowPrivate?: boolean
}

/** What to create a container from. */
export interface ContainerSpec {
  image: string
  /** Engine-side name; the engine picks one when omitted. */
  name?: string
  /** The main process. Berth's containers idle (see {@link IDLE_COMMAND}) and are exec'd into. */
  cmd?: string[]
  entrypoint?: string[]
  env?: Record<string, string>
  /** Working directory of the main process and the default for `exec`. */
  workingDir?: string
  /** `uid`, `uid:gid` or a user name known to the image. */
  user?: string
  mounts?: ContainerMount[]
  limits?: ResourceLimits
  /** Labels; adapters always add `berth.managed=true`. Use `berth.*` keys (`berth.owner`, `berth.workspace`, `berth.pool`). */
  labels?: Record<string, string>
  /** `bridge` (egress allowed, no published ports), `none`, `host` or a named network. Ignored with `egress`. */
  network?: string
  /** A network policy the runtime enforces (see {@link EgressPolicy}); wins over `network`. */
  egress?: EgressPolicy
  /** The isolation level (default `container`); a runtime without it fails the create (`invalid`). */
  isolation?: Isolation
}

/** A main process that keeps a container alive until stopped, for any POSIX image. */
export const IDLE_COMMAND: readonly string[] = ['sleep', 'infinity']

/** The label every Berth container carries, so the server finds its own after a restart. */
export const MANAGED_LABEL = 'berth.managed'

/** Lifecycle state, Docker's vocabulary. */
export type ContainerState = 'created' | 'running' | 'paused' | 'restarting' | 'removing' | 'exited' | 'dead'

/** One container as `list` reports it. */
export interface ContainerSummary {
  id: string
  name: string
  image: string
  state: ContainerState
  labels: Record<string, string>
  /** ISO-8601 UTC. */
  createdAt: string
}

/** One container as `inspect` reports it. */
export interface ContainerInfo extends ContainerSummary {
  running: boolean
  /** Exit code of the main process once it exited, else `null`. */
  exitCode: number | null
  startedAt: string | null
  finishedAt: string | null
  /** True when the kernel's OOM killer ended the main process. */
  oomKilled: boolean
  /** The limits the engine applied (absent: unlimited or not enforced). */
  limits: ResourceLimits
}

/** A point-in-time resource reading. */
export interface ContainerStats {
  /** Memory in use, page cache excluded (what `docker stats` shows). */
  memoryBytes: number
  memoryLimitBytes: number | null
  pids: number | null
}

/** Bytes in: a buffer, a web stream or any async iterable of chunks. */
export type ByteSource = Uint8Array | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>

/** What `exec` accepts as stdin: bytes, text, or a stream/iterable of either. */
export type StdinSource = string | ByteSource | AsyncIterable<string | Uint8Array>

/** One command to run in a running container. */
export interface ExecOptions {
  cmd: string[]
  /** Added to the container's environment for this command only. */
  env?: Record<string, string>
  /** Working directory; the container's `workingDir` when omitted. */
  cwd?: string
  user?: string
  /** Piped to the command's stdin, then closed. Without it the command's stdin is empty. */
  stdin?: StdinSource
  /** Called with each stdout chunk as it arrives; `stdout` then yields nothing. */
  onStdout?: (chunk: Uint8Array) => void
  /** Called with each stderr chunk as it arrives; `stderr` then yields nothing. */
  onStderr?: (chunk: Uint8Array) => void
  /** Aborting kills the command (and its children); `exit` resolves with `killed: true`. */
  signal?: AbortSignal
}

/** How a command ended. */
export interface ExecResult {
  /** The command's exit code; `null` when the runtime could not learn it after a kill. */
  exitCode: number | null
  /** True when ended by `kill()` or the abort signal. */
  killed: boolean
}

/** A running command. */
export interface ExecProcess {
  /** stdout chunks as they arrive (buffered until read); ends when the command ends. */
  stdout: AsyncIterable<Uint8Array>
  /** stderr chunks, likewise. */
  stderr: AsyncIterable<Uint8Array>
  /**
   * Resolves once the command ended and all its output was delivered. Rejects with a
   * `ContainerError` when the container dies or the engine goes away meanwhile.
   */
  exit: Promise<ExecResult>
  /** Kill the command and its children. Resolves once the kill was sent. */
  kill(): Promise<void>
}

/** What a runtime can and cannot guarantee. */
export interface RuntimeCapabilities {
  /** Processes are isolated from the host (namespaces, dropped capabilities). */
  isolation: boolean
  /** `limits` are enforced and reported by `inspect`. */
  limits: boolean
  /** A non-root `user` is honoured: commands run as it with no capabilities, the working directory and put files its own. */
  unprivilegedUser?: boolean
  /** Egress policies the runtime enforces (`local` under bubblewrap: all three, its sandboxes having no network but the broker's sockets). */
  egress?: readonly EgressPolicy['policy'][]
  /**
   * Containers outlive the server: a clean stop leaves them running for the next start to
   * adopt (default true). `false` on `local`, whose sandboxes are the server's own host
   * processes: a clean stop releases warm sessions (their conversations and files kept, as
   * when they idle out) and removes every container.
   */
  outlivesServer?: boolean
}

/** Filter for {@link ContainerRuntime.list}. */
export interface ListFilter {
  /** Every label must match (`true`: present with any value). `berth.managed=true` is implied. */
  labels?: Record<string, string | true>
  /** Also list containers that are not running (default true). */
  all?: boolean
}

/** The label an image built from an {@link ImageRecipe} carries: the recipe's hash. */
export const RECIPE_LABEL = 'berth.recipe'

/**
 * How to build an image that cannot be pulled: a root filesystem and the config it runs
 * with. `@berth/adapter-docker`'s `hostImageRecipe()` is one (the host's Node, bash, git).
 */
export interface ImageRecipe {
  /** What the image is built from, as a hash: an image whose {@link RECIPE_LABEL} differs is rebuilt. */
  hash: string
  /** For the progress line, e.g. `the host's node v20.19.2, bash, busybox, git`. */
  description: string
  /** The root filesystem as a tar stream; called once per build. */
  rootfs(): AsyncIterable<Uint8Array>
  /** Environment of the image, e.g. `{ PATH: '/usr/local/bin:/usr/bin:/bin' }`. */
  env?: Record<string, string>
  cmd?: string[]
  workingDir?: string
  /** Labels of the image, beside {@link RECIPE_LABEL}. */
  labels?: Record<string, string>
}

/** Options of {@link ContainerRuntime.ensureImage}. */
export interface EnsureImageOptions {
  /** Built (and labelled with its hash) when the image is absent and cannot be pulled, or built from an older recipe. */
  recipe?: ImageRecipe
  /** Called when real work starts: a pull, then (if that fails) a build. */
  onProgress?: (stage: 'pulling' | 'building', message: string) => void
}

/** What {@link ContainerRuntime.ensureImage} found or did. */
export interface ImageReport {
  /** The name the engine knows the image by (Podman: `localhost/…` for local images). */
  ref: string
  /** The engine's image id. */
  id: string
  /** `present`: it was there (and current); `pulled` from a registry; `built` from the recipe. */
  source: 'present' | 'pulled' | 'built'
  /** The recipe hash the image carries, when Berth built it. */
  recipe?: string
}

/** One named volume as `listVolumes` reports it. */
export interface VolumeSummary {
  name: string
  labels: Record<string, string>
}

export type { DirectoryListing, FileEntry, FileWrite } from './container-files.js'

/** A network {@link ContainerRuntime.pruneNetworks} found, and removed unless it was a dry run. */
export interface PrunedNetwork {
  name: string
  /** What goes with it, e.g. its host firewall chains. */
  detail: string
  /** Why it could not be removed. */
  error?: string
}

/** A TCP address on the host's side of a container's network (see {@link ContainerRuntime.portTarget}). */
export interface PortTarget {
  host: string
  port: number
  /** A unix socket on this host that reaches the port instead (the local runtime's forwarder into a sandbox's network). */
  socketPath?: string
}

/** The port every container adapter implements. All failures reject with a `ContainerError` (`runtime/errors.ts`). */
export interface ContainerRuntime {
  /** `docker`, `podman`, `local`, ... */
  readonly name: string
  readonly capabilities: RuntimeCapabilities
  /** Resolves when the engine answers. */
  ping(): Promise<void>
  /** Create (not start) a container; resolves its id. */
  create(spec: ContainerSpec): Promise<{ id: string; name: string }>
  start(id: string): Promise<void>
  /** SIGTERM, then SIGKILL after `timeoutSeconds` (default 10). Stopping a stopped container resolves. */
  stop(id: string, options?: { timeoutSeconds?: number }): Promise<void>
  /** Kill if running and remove, with anonymous volumes. Removing an absent container resolves. */
  remove(id: string): Promise<void>
  exec(id: string, options: ExecOptions): Promise<ExecProcess>
  /** Extract a tar archive into `path`, which must be an existing directory. */
  putArchive(id: string, path: string, tar: ByteSource): Promise<void>
  /** A tar of `path` (a file or a directory, itself as the archive's top entry). */
  getArchive(id: string, path: string): Promise<ReadableStream<Uint8Array>>
  /**
   * File operations, confined to `root` (an absolute directory in the container): every
   * `path` is relative to it (or absolute under it), `..` segments are refused and symbolic
   * links are resolved in the container's own view; whatever resolves outside `root` is a
   * `FilePathError` `outside`, like a missing path (`missing`) or a wrong kind.
   * `listFiles` lists a directory (at most `maxEntries`, default 10,000; a listing over
   * 16 MiB is `too_large`).
   */
  listFiles(id: string, root: string, path: string, options?: { maxEntries?: number }): Promise<DirectoryListing>
  /** One file's bytes, whole (at most `maxBytes`, default 64 MiB, else `too_large`). */
  readFile(id: string, root: string, path: string, options?: { maxBytes?: number }): Promise<Uint8Array>
  /** A tar of `paths`, each named in it as given relative to `root` (`.` for the root); all are resolved before it streams. */
  archiveFiles(id: string, root: string, paths: string[]): Promise<ReadableStream<Uint8Array>>
  /** Start writing files under `root` (see {@link FileWrite}). */
  writeFiles(id: string, root: string): Promise<FileWrite>
  /** Berth's containers (label `berth.managed=true`), filtered by label. */
  list(filter?: ListFilter): Promise<ContainerSummary[]>
  inspect(id: string): Promise<ContainerInfo>
  stats(id: string): Promise<ContainerStats>
  /**
   * Create a named volume with labels (`berth.managed=true` is added), so a restarted
   * server can account for it. An existing volume of that name resolves as it is (its disk
   * mounted again after a reboot). With `sizeBytes`, a runtime that sizes workspaces
   * (`limits.diskBytes`) makes the volume a filesystem of that size, and grows an existing
   * one asked for larger (its files kept; never shrunk).
   */
  createVolume(name: string, options?: { labels?: Record<string, string>; sizeBytes?: number }): Promise<void>
  /** Berth's volumes (label `berth.managed=true`), filtered by label like {@link list}. */
  listVolumes(filter?: Pick<ListFilter, 'labels'>): Promise<VolumeSummary[]>
  /** Remove a named volume (a workspace's files); absent volumes resolve. */
  removeVolume(name: string): Promise<void>
  /**
   * Make sure `ref` exists on the engine before containers are created from it: reuse it
   * when present (rebuilding one Berth built from another recipe), else pull it, else
   * build it from `options.recipe`. Concurrent calls for one ref share one provisioning.
   * Rejects with `not_found` when the image is absent, cannot be pulled and there is no
   * recipe. Runtimes without images (`local`) omit it.
   */
  ensureImage?(ref: string, options?: EnsureImageOptions): Promise<ImageReport>
  /**
   * Where this host reaches TCP `port` inside the running container (a preview's target):
   * the container's address on its engine network, or loopback for a `local` sandbox that
   * shares the host's network. `null` when nothing of the container is reachable from the
   * host (no network but loopback). Runtimes without it serve no previews.
   */
  portTarget?(id: string, port: number): Promise<PortTarget | null>
  /**
   * The isolation levels this runtime can give now (an engine: `gvisor` once a `runsc`
   * runtime is registered with it). Runtimes without it give `container` only.
   */
  isolations?(): Promise<readonly Isolation[]>
  /**
   * The networks Berth made on this engine that containers labelled `berth.pool=<pool>` use
   * and no other container does (an allowlist's network, with its host firewall chains):
   * listed, and unless `dryRun` removed once no container uses them. A network no container
   * uses is this pool's only when `used` names it (the networks its containers were on before
   * they were removed): an unused one cannot be told apart from another deployment's between
   * two tasks, and is left to that deployment's sweep. Networks other deployments may rely on
   * without a container on them (`berth-public`) stay. Runtimes without networks omit it.
   */
  pruneNetworks?(pool: string, options?: { dryRun?: boolean; used?: ReadonlySet<string> }): Promise<PrunedNetwork[]>
  /** Release connections and timers. */
  close?(): Promise<void>
}

import { MANAGED_LABEL, type ContainerSpec, type ResourceLimits } from '@berth/core'
import type { ContainerCreateOptions } from 'dockerode'

/**
 * Capabilities a Berth container keeps after `CapDrop: ['ALL']`. The agent works as root
 * on its own workspace files, installs packages and runs build tools, so it needs:
 * - CHOWN, FOWNER, DAC_OVERRIDE: own and modify files whose owner differs from the
 *   process (bind-mounted workspaces, `npm install`/`git checkout` fixing ownership);
 * - SETUID, SETGID: drop to an unprivileged user (`su`, `npm` lifecycle scripts, gosu);
 * - KILL: signal its own processes that run under another uid (cleanup, timeouts).
 * Everything else (NET_RAW, MKNOD, SYS_CHROOT, SETPCAP, AUDIT_WRITE, NET_BIND_SERVICE, …)
 * stays dropped; combined with no-new-privileges no setuid binary can regain them.
 */
export const DEFAULT_CAP_ADD: readonly string[] = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'SETUID', 'SETGID', 'KILL']

/** Limits applied when a spec sets none: 2 GiB memory (no swap), 2 CPUs, 1024 pids, 512 MiB of `/tmp`. */
export const DEFAULT_LIMITS: Required<Omit<ResourceLimits, 'diskBytes'>> = {
  memoryBytes: 2 * 1024 ** 3,
  cpus: 2,
  pids: 1024,
  tmpBytes: 512 * 1024 ** 2,
}

/** The label of a container made with `isolation: 'gvisor'`. */
export const ISOLATION_LABEL = 'berth.isolation'

/**
 * Processes added to a gVisor container's pids limit: the host's pids cgroup also counts
 * runsc's own threads (its kernel, the file proxy) and, on the ptrace platform, one stub
 * process per agent process. Without it a limit of 64 stops the sandbox's kernel itself,
 * not the agent. The agent's own processes meet gVisor's kernel first.
 */
export const GVISOR_PIDS_HEADROOM = 256

/**
 * The writable paths of a container with a read-only root, each a tmpfs of `/tmp`'s size
 * (all of them count against the memory limit): the agent's `$HOME` under `/home` (the
 * runner makes it when the tmpfs hides it), root's, `/var/tmp` and `/run`.
 */
const READ_ONLY_ROOT_TMPFS = (size: string): Record<string, string> => ({
  '/var/tmp': `rw,nosuid,nodev,${size},mode=1777`,
  '/run': `rw,nosuid,nodev,${size},mode=755`,
  '/home': `rw,nosuid,nodev,${size},mode=755`,
  '/root': `rw,nosuid,nodev,${size},mode=700`,
})

/** How containers are locked down; every field has a safe default. */
export interface HardeningOptions {
  /** Capabilities kept after dropping all (default {@link DEFAULT_CAP_ADD}). */
  capAdd?: readonly string[]
  /** Limits for specs that set none, field by field (default {@link DEFAULT_LIMITS}). */
  defaultLimits?: ResourceLimits
  /** Network mode for specs that set none (default `bridge`: egress, no published ports). */
  network?: string
  /** Extra `SecurityOpt` entries (seccomp/apparmor profiles); `no-new-privileges` is always set. */
  securityOpt?: readonly string[]
  /** The engine's name of gVisor's runtime, for specs with `isolation: 'gvisor'` (default `runsc`). */
  gvisorRuntime?: string
}

/**
 * The Engine API create body for a spec, hardened: not privileged, all capabilities dropped
 * but {@link DEFAULT_CAP_ADD}, no-new-privileges, an init process (node as PID 1 ignores
 * SIGTERM), memory/CPU/pids limits, no published ports, and `berth.managed=true`. With
 * `layout.readOnlyRoot` the root filesystem is read-only and its writable paths sized tmpfs.
 *
 * @example
 * ```ts
 * const body = toCreateOptions({ image: 'berth-test:latest', labels: { 'berth.pool': 'p1' } }, 'berth-abc')
 * body.HostConfig?.CapDrop // ['ALL']
 * ```
 */
export function toCreateOptions(
  spec: ContainerSpec,
  name: string,
  hardening: HardeningOptions = {},
  layout: { readOnlyRoot?: boolean } = {},
): ContainerCreateOptions {
  const limits = { ...DEFAULT_LIMITS, ...hardening.defaultLimits, ...spec.limits }
  const size = `size=${Math.max(1, Math.floor(limits.tmpBytes / 1024))}k`
  const env = Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${v}`)
  const gvisor = spec.isolation === 'gvisor'
  return {
    name,
    Image: spec.image,
    Cmd: spec.cmd ? [...spec.cmd] : undefined,
    Entrypoint: spec.entrypoint ? [...spec.entrypoint] : undefined,
    Env: env,
    WorkingDir: spec.workingDir,
    User: spec.user,
    Labels: { ...spec.labels, [MANAGED_LABEL]: 'true', ...(gvisor && { [ISOLATION_LABEL]: 'gvisor' }) },
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    OpenStdin: false,
    Tty: false,
    ExposedPorts: {},
    HostConfig: {
      // gVisor: the same container, its system calls served by runsc's kernel, not the host's.
      ...(gvisor && { Runtime: hardening.gvisorRuntime ?? 'runsc' }),
      Init: true,
      Privileged: false,
      CapDrop: ['ALL'],
      CapAdd: [...(hardening.capAdd ?? DEFAULT_CAP_ADD)],
      SecurityOpt: ['no-new-privileges', ...(hardening.securityOpt ?? [])],
      Memory: limits.memoryBytes,
      MemorySwap: limits.memoryBytes,
      NanoCpus: Math.round(limits.cpus * 1e9),
      PidsLimit: limits.pids + (gvisor ? GVISOR_PIDS_HEADROOM : 0),
      // A sized tmpfs: the host's disk never holds the agent's scratch files.
      Tmpfs: {
        '/tmp': `rw,nosuid,nodev,${size},mode=1777`,
        ...(layout.readOnlyRoot && READ_ONLY_ROOT_TMPFS(size)),
      },
      ReadonlyRootfs: layout.readOnlyRoot === true,
      NetworkMode: spec.network ?? hardening.network ?? 'bridge',
      PublishAllPorts: false,
      PortBindings: {},
      RestartPolicy: { Name: 'no' },
      Mounts: (spec.mounts ?? []).map((m) => ({
        Type: m.type,
        Source: m.source,
        Target: m.target,
        ReadOnly: m.readOnly ?? false,
      })),
    },
  }
}

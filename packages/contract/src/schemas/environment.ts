import * as v from 'valibot'
import { Description, Id, Name, RecordMeta } from './common.js'

/** Network policies, from the most to the least restricted. */
export const NETWORK_POLICIES = ['none', 'public', 'allowlist'] as const
export type NetworkPolicy = (typeof NETWORK_POLICIES)[number]

/**
 * Isolation levels: `container` (the engine's default runtime: namespaces, cgroups, dropped
 * capabilities) or `gvisor` (the same, with gVisor's user-space kernel, `runsc`, between the
 * agent and the host's kernel).
 */
export const ISOLATIONS = ['container', 'gvisor'] as const
export type Isolation = (typeof ISOLATIONS)[number]

/** A host name, an IPv4/IPv6 address or an IPv4 CIDR, e.g. `pypi.org`, `203.0.113.7`, `203.0.113.0/24`. */
const Destination = v.pipe(
  v.string(),
  v.maxLength(253),
  v.regex(
    /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\d{1,3}(?:\.\d{1,3}){3}(?:\/\d{1,2})?|[0-9a-f:]+(?:\/\d{1,3})?)$/i,
    'must be a host name, an IP address or a CIDR',
  ),
)
const Port = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))

/** One allowed destination: TCP to `host` on `ports` (all ports when empty or absent). */
export const AllowEntry = v.strictObject({
  host: Destination,
  ports: v.optional(v.pipe(v.array(Port), v.maxLength(20))),
})

/** Where the agent's container may connect to. */
export const NetworkSpec = v.strictObject({
  /** `none`: no network at all. `public`: the internet, never private, loopback, link-local, CGNAT, multicast or metadata addresses. `allowlist`: only `allow` (and the model endpoint). */
  policy: v.picklist(NETWORK_POLICIES),
  /** Destinations `allowlist` lets through (ignored by the other policies). */
  allow: v.optional(v.pipe(v.array(AllowEntry), v.maxLength(50))),
})

/** Resource limits of the environment's containers; `null` takes the operator's default. */
export const EnvironmentLimits = v.strictObject({
  cpus: v.optional(v.nullable(v.pipe(v.number(), v.minValue(0.05), v.maxValue(256)))),
  memory_mb: v.optional(v.nullable(v.pipe(v.number(), v.integer(), v.minValue(64), v.maxValue(1024 * 1024)))),
  pids: v.optional(v.nullable(v.pipe(v.number(), v.integer(), v.minValue(16), v.maxValue(1_000_000)))),
  disk_mb: v.optional(v.nullable(v.pipe(v.number(), v.integer(), v.minValue(64), v.maxValue(100 * 1024 * 1024)))),
})

/** Environment variables that are not secrets (secrets go to `/v1/secrets`). Names are shell identifiers. */
export const EnvVars = v.pipe(
  v.record(
    v.pipe(
      v.string(),
      v.regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'names are letters, digits and _ (not starting with a digit)'),
      // Berth's and the agent SDK's own settings are not the environment's to override.
      v.regex(/^(?!(BERTH|ANTHROPIC|CLAUDE)_)/i, 'names starting with BERTH_, ANTHROPIC_ or CLAUDE_ are reserved'),
    ),
    v.pipe(v.string(), v.maxLength(10_000)),
  ),
  v.check((m) => Object.keys(m).length <= 100, 'at most 100 variables'),
)

/** An image reference, e.g. `python:3.12-slim` or `registry.example.com/team/agent:1`. */
export const ImageRef = v.pipe(
  v.string(),
  v.maxLength(255),
  v.regex(/^[a-z0-9][a-z0-9._\-/:@]*$/, 'must be an image reference (lowercase)'),
)

/** Host packages (Debian names) copied into an image built from the host. */
export const Packages = v.pipe(
  v.array(v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9.+-]{0,99}$/, 'must be a Debian package name'))),
  v.maxLength(50),
)

/** The state of an environment's image: provisioned once per content hash. */
export const ImageStatus = v.object({
  /** The image the containers start from. */
  ref: v.string(),
  state: v.picklist(['building', 'ready', 'failed']),
  /** What the image is built from, as a hash (`null` for an image that is pulled or present). */
  hash: v.nullable(v.string()),
  /** The tail of the build log (or the pull error) when it failed. */
  log_tail: v.nullable(v.string()),
})

const environmentFields = {
  name: Name,
  description: Description,
  /** An image to pull (or that the engine has); `null`: the operator's image. */
  image: v.nullable(ImageRef),
  /** Host packages added to the operator's host-built image (ignored with `image`). */
  packages: Packages,
  network: v.object({
    policy: v.picklist(NETWORK_POLICIES),
    allow: v.array(v.object({ host: v.string(), ports: v.array(v.number()) })),
  }),
  limits: v.object({
    cpus: v.nullable(v.number()),
    memory_mb: v.nullable(v.number()),
    pids: v.nullable(v.number()),
    disk_mb: v.nullable(v.number()),
  }),
  env: v.record(v.string(), v.string()),
  /** The agent runs as root in the container (only where the operator allows it). */
  run_as_root: v.boolean(),
  /** How the containers are separated from the host's kernel (the operator may require `gvisor`). */
  isolation: v.picklist(ISOLATIONS),
}

/** An environment: what the agent's container is made of and may reach. */
export const Environment = v.object({
  id: Id('environment'),
  ...environmentFields,
  image_status: ImageStatus,
  ...RecordMeta,
})

/**
 * Body of `POST /v1/environments`. Limits and policies must lie within the operator's caps
 * (400 naming the field beyond them).
 */
export const CreateEnvironment = v.strictObject({
  name: Name,
  description: v.optional(Description),
  image: v.optional(v.nullable(ImageRef)),
  packages: v.optional(Packages),
  network: v.optional(NetworkSpec),
  limits: v.optional(EnvironmentLimits),
  env: v.optional(EnvVars),
  run_as_root: v.optional(v.boolean()),
  /** `container` (default) or `gvisor`; 400 when the server's runtime has no gVisor. */
  isolation: v.optional(v.picklist(ISOLATIONS)),
})
export const UpdateEnvironment = v.partial(CreateEnvironment)

export type Environment = v.InferOutput<typeof Environment>
export type CreateEnvironment = v.InferOutput<typeof CreateEnvironment>
export type UpdateEnvironment = v.InferOutput<typeof UpdateEnvironment>
export type ImageStatus = v.InferOutput<typeof ImageStatus>

import { CreateEnvironment, Environment, UpdateEnvironment } from '../schemas/environment.js'
import { crudRoutes } from './crud.js'

export const environmentRoutes = crudRoutes({
  area: 'environments',
  base: '/v1/environments',
  idKind: 'environment',
  label: 'environment',
  item: Environment,
  create: CreateEnvironment,
  update: UpdateEnvironment,
  createNote:
    "What a profile's agent containers are made of and may reach. `network.policy`: `none` (no network), `public` (internet, never private, loopback, link-local/metadata, CGNAT or multicast addresses; the default) or `allowlist` (only `network.allow`, plus the model endpoint and remote MCP servers). `limits` and policies beyond the operator's caps are a 400 naming the field. The image (`image`, or the host image plus `packages`) is provisioned once per content hash: `image_status.state` is `building`, `ready` or `failed` (with `log_tail`); a task on a failed one is refused at submit. `env` is for values that are not secrets. An environment a profile names cannot be deleted (400).",
})

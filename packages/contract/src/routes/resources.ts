import * as v from 'valibot'
import { maxLength } from '../schemas/length.js'
import { defineRoute } from '../route.js'
import { CreateApiKey, ApiKey, UpdateApiKey } from '../schemas/api-key.js'
import {
  Agent,
  CreateAgent,
  CreateSkill,
  CreateTool,
  Skill,
  Tool,
  UpdateAgent,
  UpdateSkill,
  UpdateTool,
} from '../schemas/catalog.js'
import { Id, IdParams, ListOf } from '../schemas/common.js'
import { CreateMemory, Memory, UpdateMemory } from '../schemas/memory.js'
import { CreateProfile, Profile, ProfileSummary, UpdateProfile } from '../schemas/profile.js'
import { ModelInfo } from '../schemas/api-key.js'
import { CreateSecret, Secret, UpdateSecret } from '../schemas/secret.js'
import { crudRoutes } from './crud.js'

export const profileRoutes = crudRoutes({
  area: 'profiles',
  base: '/v1/profiles',
  idKind: 'profile',
  label: 'profile',
  item: Profile,
  listItem: ProfileSummary,
  create: CreateProfile,
  update: UpdateProfile,
  createNote:
    '`slug` must be unique among your profiles; `api_key_id` must be one of your model credentials and `model` one it allows. Lists omit `claude_md`. Deleting a profile keeps its workspaces.',
})

export const listProfileModels = defineRoute({
  name: 'profiles.models',
  method: 'GET',
  path: '/v1/profiles/:id/models',
  auth: 'caller',
  tag: 'profiles',
  summary: "List the models the profile's credential allows",
  params: IdParams('profile'),
  response: ListOf('models', ModelInfo),
})

export const apiKeyRoutes = crudRoutes({
  area: 'api-keys',
  base: '/v1/api-keys',
  idKind: 'apiKey',
  label: 'model credential',
  item: ApiKey,
  create: CreateApiKey,
  update: UpdateApiKey,
  createNote:
    "The key is write-only: encrypted at rest, never returned (`has_key` tells whether one is set). Provider `anthropic` takes `key`; `bedrock` takes `aws_access_key_id`, `aws_secret_access_key`, `aws_region` and optionally `aws_session_token` (the secret and the token write-only); `vertex` takes `gcp_service_account` (the JSON key, write-only), `gcp_region` and optionally `gcp_project_id` (default: the key's); both take `model_map` (model id → the provider's id, over Berth's defaults). A field of another provider is 400. Their credentials reach only the model gateway, never a task's container (docs/CREDENTIALS.md). Provider `stub` is the built-in offline model and needs no key. `base_url` and a service account's `token_uri` follow the webhook address policy (no private, loopback or link-local hosts unless the server allows them). Narrowing `allowed_models` so that a profile’s model is left out is 400 naming `allowed_models`; deleting a credential profiles still use is 409 CONFLICT with `details.profile_ids`.",
  errors: { delete: ['CONFLICT'] },
})

export const memoryRoutes = crudRoutes({
  area: 'memory',
  base: '/v1/memory',
  idKind: 'memory',
  label: 'memory row',
  item: Memory,
  create: CreateMemory,
  update: UpdateMemory,
  filters: { profile_id: v.optional(Id('profile')), type: v.optional(v.pipe(v.string(), maxLength(32))) },
  createNote:
    'The list spans all your profiles; filter with `profile_id`. A row without `profile_id` applies to every profile.',
})

export const secretRoutes = crudRoutes({
  area: 'secrets',
  base: '/v1/secrets',
  idKind: 'secret',
  label: 'secret',
  item: Secret,
  create: CreateSecret,
  update: UpdateSecret,
  createNote:
    'The value is write-only: encrypted at rest (AES-256-GCM) and never returned; lists show names only. Tasks of profiles in scope get it as an environment variable.',
})

export const toolRoutes = crudRoutes({
  area: 'tools',
  base: '/v1/tools',
  idKind: 'tool',
  label: 'tool',
  item: Tool,
  create: CreateTool,
  update: UpdateTool,
})

export const skillRoutes = crudRoutes({
  area: 'skills',
  base: '/v1/skills',
  idKind: 'skill',
  label: 'skill',
  item: Skill,
  create: CreateSkill,
  update: UpdateSkill,
})

export const agentRoutes = crudRoutes({
  area: 'agents',
  base: '/v1/agents',
  idKind: 'agent',
  label: 'agent',
  item: Agent,
  create: CreateAgent,
  update: UpdateAgent,
})

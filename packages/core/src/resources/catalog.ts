import type { Clock } from '../ports/clock.js'
import type { Cipher } from '../ports/cipher.js'
import type { Store } from '../ports/store.js'
import {
  type Agent,
  type Skill,
  type Tool,
  Secret,
  type CreateSecret,
  type SecretDelivery,
  type UpdateSecret,
} from '@berth/contract'
import { validationError } from '@berth/contract'
import * as S from '@berth/contract'
import type * as v from 'valibot'
import { NamedScopedService, pickDefined, type NamedScopedRecord } from '../records/named.js'
import { toView } from '../records/view.js'
import { maskServer, sealServer } from './mcp-secrets.js'
import type { ProfilesService } from './profiles.js'

export interface ToolRecord
  extends NamedScopedRecord,
    Omit<Tool, 'id' | 'name' | 'scope' | 'profile_ids' | 'created_at' | 'updated_at'> {}
export interface SkillRecord
  extends NamedScopedRecord,
    Omit<Skill, 'id' | 'name' | 'scope' | 'profile_ids' | 'created_at' | 'updated_at'> {}
export interface AgentRecord
  extends NamedScopedRecord,
    Omit<Agent, 'id' | 'name' | 'scope' | 'profile_ids' | 'created_at' | 'updated_at'> {}
export interface SecretRecord extends NamedScopedRecord {
  value_encrypted: string
  /** Absent on records from before delivery modes: `env`. */
  delivery?: SecretDelivery
  hosts?: string[]
}

/** A secret's delivery and hosts must agree: `brokered` needs hosts, `env` takes none. */
function checkDelivery(delivery: SecretDelivery, hosts: readonly string[]): void {
  if (delivery === 'brokered' && hosts.length === 0)
    throw validationError([
      { location: 'body', path: 'hosts', message: 'a brokered secret needs the hosts it may be sent to' },
    ])
  if (delivery === 'env' && hosts.length > 0)
    throw validationError([
      {
        location: 'body',
        path: 'hosts',
        message: 'hosts apply to brokered secrets only (set delivery to "brokered", or leave hosts out)',
      },
    ])
}

/** A secret's value as a task gets it: the value itself, or where the proxy puts it. */
export type SecretForTask =
  | { name: string; delivery: 'env'; value: string }
  | { name: string; delivery: 'brokered'; value: string; hosts: string[]; placeholder: string }

/**
 * The placeholder a brokered secret's variable holds inside the container. Not secret: it
 * names the secret, and only the egress proxy turns it into the value, for its hosts only.
 *
 * @example
 * ```ts
 * brokeredPlaceholder('secret_0abc') // 'berth_brokered_secret_0abc'
 * ```
 */
export function brokeredPlaceholder(secretId: string): string {
  return `berth_brokered_${secretId}`
}

type In<S extends v.GenericSchema> = v.InferOutput<S>

/**
 * Tools (MCP servers).
 *
 * @example
 * ```ts
 * await tools.create(caller.id, { name: 'search', server: { type: 'http', url: 'https://mcp.example.com', headers: { Authorization: 'Bearer t' } } })
 * ```
 */
export function createToolsService(store: Store, clock: Clock, cipher: Cipher) {
  return new NamedScopedService<ToolRecord, Tool, In<typeof S.CreateTool>, In<typeof S.UpdateTool>>(store, clock, {
    kind: 'tools',
    label: 'tool',
    idKind: 'tool',
    // The server's env and headers values are credentials: sealed, masked, kept on a mask.
    create: (i) => ({ description: i.description ?? '', server: sealServer(i.server, cipher, undefined, 'server') }),
    update: (i, current) => ({
      ...pickDefined(i, ['description'] as const),
      ...(i.server && { server: sealServer(i.server, cipher, current.server, 'server') }),
    }),
    view: (r) => toView(S.Tool, r, { server: maskServer(r.server) }),
  })
}

/**
 * Skills (SKILL.md bodies).
 *
 * @example
 * ```ts
 * await skills.create(caller.id, { name: 'changelog', body: '# Changelog\nWrite entries as...' })
 * ```
 */
export function createSkillsService(store: Store, clock: Clock) {
  return new NamedScopedService<SkillRecord, Skill, In<typeof S.CreateSkill>, In<typeof S.UpdateSkill>>(store, clock, {
    kind: 'skills',
    label: 'skill',
    idKind: 'skill',
    create: (i) => ({ description: i.description ?? '', body: i.body }),
    update: (i) => pickDefined(i, ['description', 'body'] as const),
    view: (r) => toView(S.Skill, r),
  })
}

/**
 * Agents (subagents with their own prompt, tools and model). The model must be one the
 * credential of every profile the agent applies to allows (400 naming `model` otherwise).
 *
 * @example
 * ```ts
 * await agents.create(caller.id, { name: 'reviewer', prompt: 'You review diffs.', tools: ['Read'], model: 'haiku' })
 * ```
 */
export function createAgentsService(store: Store, clock: Clock, profiles: ProfilesService) {
  return new NamedScopedService<AgentRecord, Agent, In<typeof S.CreateAgent>, In<typeof S.UpdateAgent>>(store, clock, {
    kind: 'agents',
    label: 'agent',
    idKind: 'agent',
    create: (i) => ({
      description: i.description ?? '',
      prompt: i.prompt,
      tools: i.tools ?? null,
      model: i.model ?? null,
    }),
    update: (i) => pickDefined(i, ['description', 'prompt', 'tools', 'model'] as const),
    view: (r) => toView(S.Agent, r),
    // The model must run with every profile the agent applies to, or each of their tasks would fail.
    check: async (owner, next, current) => {
      const same =
        current &&
        next.model === current.model &&
        next.scope === current.scope &&
        next.profile_ids.join() === current.profile_ids.join()
      if (!same) await profiles.assertAgentModel(owner, next, next.model)
    },
  })
}

/**
 * Secrets: the value is encrypted at rest and never returned.
 *
 * @example
 * ```ts
 * await secrets.create(caller.id, { name: 'GITHUB_TOKEN', value: 'ghp_...' })
 * ```
 */
export function createSecretsService(store: Store, clock: Clock, cipher: Cipher) {
  const service = new NamedScopedService<SecretRecord, Secret, CreateSecret, UpdateSecret>(store, clock, {
    kind: 'secrets',
    label: 'secret',
    idKind: 'secret',
    create: (i) => {
      const delivery = i.delivery ?? 'env'
      const hosts = i.hosts ?? []
      checkDelivery(delivery, hosts)
      return { value_encrypted: cipher.encrypt(i.value), delivery, hosts }
    },
    update: (i, current) => {
      const delivery = i.delivery ?? current.delivery ?? 'env'
      // Switching a brokered secret to env drops its hosts unless the update names some.
      const hosts = i.hosts ?? (i.delivery === 'env' ? [] : (current.hosts ?? []))
      checkDelivery(delivery, hosts)
      return {
        ...(i.value !== undefined && { value_encrypted: cipher.encrypt(i.value) }),
        delivery,
        hosts,
      }
    },
    view: (r) => toView(Secret, { ...r, delivery: r.delivery ?? 'env', hosts: r.hosts ?? [] }),
  })
  return Object.assign(service, {
    /** The secrets that apply to a profile, decrypted, with how each reaches the task. */
    async forTask(owner: string, profileId: string): Promise<SecretForTask[]> {
      return (await service.forProfile(owner, profileId)).map((r) => {
        const value = cipher.decrypt(r.value_encrypted)
        return r.delivery === 'brokered'
          ? { name: r.name, delivery: 'brokered', value, hosts: r.hosts ?? [], placeholder: brokeredPlaceholder(r.id) }
          : { name: r.name, delivery: 'env', value }
      })
    },
    /** Plaintext `NAME → value` of the secrets that apply to a profile (task environment only). */
    async environment(owner: string, profileId: string): Promise<Record<string, string>> {
      const env: Record<string, string> = {}
      for (const r of await service.forProfile(owner, profileId)) env[r.name] = cipher.decrypt(r.value_encrypted)
      return env
    },
  })
}

export type ToolsService = ReturnType<typeof createToolsService>
export type SkillsService = ReturnType<typeof createSkillsService>
export type AgentsService = ReturnType<typeof createAgentsService>
export type SecretsService = ReturnType<typeof createSecretsService>

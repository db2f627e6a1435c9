/**
 * Type-level checks: the client's types come from core's route table. Run by vitest's
 * typecheck (this project) and by the repository's `tsc`.
 */
import { describe, expectTypeOf, it } from 'vitest'
import type {
  Approval,
  BerthClient,
  BerthError,
  BerthErrorCode,
  RouteInput,
  RouteName,
  RouteOutput,
  Task,
  TaskEvent,
  TaskEventOf,
  TaskControls,
  TaskStream,
} from '@berth/client'

declare const client: BerthClient

describe('client types from the route table', () => {
  it('types profiles.get: params in, the full profile (claude_md included) out', () => {
    expectTypeOf<RouteInput<'profiles.get'>>().toEqualTypeOf<{ params: { id: string } }>()
    expectTypeOf<RouteOutput<'profiles.get'>>().toHaveProperty('claude_md').toEqualTypeOf<string>()
    expectTypeOf<RouteOutput<'profiles.get'>>().toHaveProperty('model').toEqualTypeOf<string | null>()
    expectTypeOf(client.profiles.get).returns.resolves.toEqualTypeOf<RouteOutput<'profiles.get'>>()
  })

  it('types list items without claude_md', () => {
    type Item = RouteOutput<'profiles.list'>['profiles'][number]
    expectTypeOf<Item>().toHaveProperty('slug').toEqualTypeOf<string>()
    expectTypeOf<Item>().not.toHaveProperty('claude_md')
    expectTypeOf<RouteOutput<'profiles.list'>>().toHaveProperty('total').toEqualTypeOf<number>()
  })

  it('requires name, slug and api_key_id in the create body, the rest optional', () => {
    type Body = RouteInput<'profiles.create'>['body']
    expectTypeOf<Body['name']>().toEqualTypeOf<string>()
    expectTypeOf<Body['slug']>().toEqualTypeOf<string>()
    expectTypeOf<Body['api_key_id']>().toEqualTypeOf<string>()
    expectTypeOf<Body['claude_md']>().toEqualTypeOf<string | undefined>()
    expectTypeOf<{ name: string; slug: string }>().not.toExtend<Body>()
    expectTypeOf<{ name: string; slug: string; api_key_id: string }>().toExtend<Body>()
    // @ts-expect-error an unknown field is not part of the body
    void client.profiles.create({ body: { name: 'n', slug: 's', api_key_id: 'key_x', nope: 1 } })
  })

  it('makes input optional only where the route takes none (or only an optional query)', () => {
    expectTypeOf(client.health).parameters.toEqualTypeOf<
      [input?: Record<never, never>, options?: import('@berth/client').CallOptions]
    >()
    expectTypeOf(client.profiles.list).toBeCallableWith()
    expectTypeOf(client.admin.users.list).toBeCallableWith({ query: { page: 2, limit: 10 } })
    // @ts-expect-error profiles.get needs params
    void client.profiles.get()
    // @ts-expect-error profiles.create needs a body
    void client.profiles.create({})
  })

  it('paginate takes list operations only and yields their items', () => {
    expectTypeOf(client.paginate('tasks.list', { query: { status: 'failed' } })).toEqualTypeOf<
      AsyncIterable<RouteOutput<'tasks.get'>>
    >()
    expectTypeOf(client.paginate('playbooks.runs', { params: { id: 'pb_x' } })).toEqualTypeOf<
      AsyncIterable<RouteOutput<'playbooks.runs'>['runs'][number]>
    >()
    // @ts-expect-error profiles.get is not a list
    void client.paginate('profiles.get', { params: { id: 'prof_x' } })
  })

  it('resolves 204 routes to void', () => {
    expectTypeOf<RouteOutput<'profiles.delete'>>().toEqualTypeOf<void>()
    expectTypeOf<RouteOutput<'admin.users.delete'>>().toEqualTypeOf<void>()
  })

  it('nests dotted names, with a camelCase alias for dashed segments', () => {
    expectTypeOf(client.apiKeys.create).toEqualTypeOf(client['api-keys'].create)
    expectTypeOf(client.apiKeys.create).parameter(0).toEqualTypeOf<RouteInput<'api-keys.create'>>()
    expectTypeOf(client.admin.users.create)
      .returns.resolves.toHaveProperty('key')
      .toHaveProperty('token')
      .toEqualTypeOf<string>()
    expectTypeOf(client.request<'profiles.get'>).returns.resolves.toEqualTypeOf<RouteOutput<'profiles.get'>>()
    expectTypeOf<'profiles.get'>().toExtend<RouteName>()
    // @ts-expect-error no such operation
    void client.request('profiles.nope')
  })

  it('types BerthError', () => {
    expectTypeOf<BerthError['status']>().toEqualTypeOf<number>()
    expectTypeOf<'NOT_FOUND'>().toExtend<BerthErrorCode>()
    expectTypeOf<'NETWORK_ERROR'>().toExtend<BerthErrorCode>()
  })

  it('types the helpers: run resolves a Task, stream yields typed events narrowed by type', () => {
    expectTypeOf(client.tasks.run).returns.resolves.toEqualTypeOf<Task>()
    expectTypeOf(client.tasks.run).parameter(0).toHaveProperty('profile_id').toEqualTypeOf<string>()
    // @ts-expect-error prompt is required
    void client.tasks.run({ profile_id: 'prof_1' })
    expectTypeOf(client.tasks.stream).returns.toEqualTypeOf<TaskStream>()
    expectTypeOf<TaskStream>().toExtend<AsyncIterable<TaskEvent>>()
    expectTypeOf<TaskEventOf<'tool_call'>['name']>().toEqualTypeOf<string>()
    expectTypeOf<TaskEventOf<'token'>['text']>().toEqualTypeOf<string>()
    expectTypeOf<TaskEvent['seq']>().toEqualTypeOf<number>()
    expectTypeOf(client.tasks.get).returns.resolves.toHaveProperty('status')
    expectTypeOf(client.sessions.start).returns.toHaveProperty('send').returns.resolves.toEqualTypeOf<Task>()
  })

  it('types steering: approve and deny resolve an Approval, interrupt a Task, approvals a list', () => {
    expectTypeOf(client.tasks.approve).returns.resolves.toEqualTypeOf<Approval>()
    expectTypeOf(client.tasks.approve)
      .parameter(2)
      .toEqualTypeOf<{ message?: string; input?: Record<string, unknown> } | undefined>()
    expectTypeOf(client.tasks.deny).returns.resolves.toHaveProperty('status').toEqualTypeOf<Approval['status']>()
    // @ts-expect-error a denial carries no replacement input
    void client.tasks.deny('task_1', 'apr_1', { input: {} })
    expectTypeOf(client.tasks.interrupt('task_1')).resolves.toEqualTypeOf<Task>()
    // The route's own form still works.
    expectTypeOf(client.tasks.interrupt({ params: { id: 'task_1' } })).resolves.toEqualTypeOf<Task>()
    expectTypeOf(client.tasks.send('task_1', 'Use staging')).resolves.toEqualTypeOf<{
      task_id: string
      accepted: true
    }>()
    // @ts-expect-error the text is required
    void client.tasks.send('task_1')
    expectTypeOf(client.tasks.approvals('task_1')).resolves.toEqualTypeOf<Approval[]>()
    expectTypeOf(client.tasks.approvals.decide).parameter(0).toHaveProperty('body').toHaveProperty('decision')
    expectTypeOf<Approval['input']>().toEqualTypeOf<unknown>()
  })

  it('types permission requests in stream and run, and the controls they hand out', () => {
    expectTypeOf<TaskEventOf<'permission_request'>['request_id']>().toEqualTypeOf<string>()
    expectTypeOf<TaskEventOf<'permission_decision'>['decision']>().toEqualTypeOf<'allow' | 'deny'>()
    expectTypeOf<TaskStream>().toExtend<TaskControls>()
    expectTypeOf<TaskStream['approve']>().returns.resolves.toEqualTypeOf<void>()
    void client.tasks.run(
      { profile_id: 'prof_1', prompt: 'Push', require_approval: ['Bash(git push:*)'] },
      {
        onPermissionRequest: (request) => {
          expectTypeOf(request.tool).toEqualTypeOf<string>()
          return request.tool === 'Bash' ? 'allow' : { decision: 'deny', message: 'Bash only' }
        },
        onEvent: (_event, controls) => expectTypeOf(controls.interrupt).returns.resolves.toEqualTypeOf<void>(),
      },
    )
    // A session's prompt takes the same callback (not sent as a submit field) and its own rules.
    void client.sessions
      .start({ profile_id: 'prof_1' })
      .send('Push', { require_approval: ['Bash'], onPermissionRequest: () => 'deny' })
    // Deciding later (nothing returned) is fine, also from an async callback.
    void client.tasks.run({ profile_id: 'prof_1', prompt: 'Push' }, { onPermissionRequest: async () => {} })
    void client.tasks.run(
      { profile_id: 'prof_1', prompt: 'Push' },
      { onPermissionRequest: async (r) => (r.tool === 'Bash' ? { decision: 'allow' } : undefined) },
    )
    void client.tasks.run(
      { profile_id: 'prof_1', prompt: 'Push' },
      // @ts-expect-error not a decision
      { onPermissionRequest: () => 'maybe' },
    )
  })
})

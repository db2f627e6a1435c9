import type { RouteMethod, RouteName } from './types.js'

/**
 * Client methods nested by the dotted operation name: `profiles.get` becomes
 * `client.profiles.get`, `admin.users.create` becomes `client.admin.users.create`. A
 * segment with dashes is reachable by its name and by its camelCase alias
 * (`client['api-keys']` and `client.apiKeys` are the same object).
 */

type Head<N extends string> = N extends `${infer H}.${string}` ? H : N
type Tail<N extends string, H extends string> = N extends `${H}.${infer T}` ? T : never

/**
 * `'api-keys'` → `'apiKeys'`.
 *
 * @example
 * ```ts
 * type K = CamelCase<'api-keys'> // 'apiKeys'
 * ```
 */
export type CamelCase<S extends string> = S extends `${infer A}-${infer B}` ? `${A}${Capitalize<CamelCase<B>>}` : S

type Node<Rel extends string, H extends string, Prefix extends string> = (H extends Rel
  ? RouteMethod<Extract<`${Prefix}${H}`, RouteName>>
  : unknown) &
  ([Tail<Rel, H>] extends [never] ? unknown : RouteTree<Tail<Rel, H>, `${Prefix}${H}.`>)

/** The nested methods for the names `Rel` (relative to `Prefix`). */
export type RouteTree<Rel extends string = RouteName, Prefix extends string = ''> = {
  readonly [H in Head<Rel> as H | CamelCase<H>]: Node<Rel, H, Prefix>
}

/**
 * `'api-keys'` → `'apiKeys'` at run time.
 *
 * @example
 * ```ts
 * camelCase('api-keys') // 'apiKeys'
 * ```
 */
export function camelCase(segment: string): string {
  return segment.replace(/-([a-z0-9])/gi, (_, c: string) => c.toUpperCase())
}

type Branch = Record<string, unknown>

function define(target: object, key: string, value: unknown): void {
  // defineProperty, not assignment: a function's own `name`/`length` are read-only.
  for (const k of new Set([key, camelCase(key)])) {
    Object.defineProperty(target, k, { value, enumerable: true, configurable: true, writable: false })
  }
}

/**
 * Build the nested method object for a list of operation names; `invoke(name)` makes the
 * function for one operation. A name that is both an operation and a group (`a` and
 * `a.b`) becomes a function carrying its children.
 *
 * @example
 * ```ts
 * const tree = buildTree(['profiles.get', 'health'], (name) => (input) => call(name, input))
 * await tree.profiles.get({ params: { id } })
 * ```
 */
export function buildTree(names: readonly string[], invoke: (name: string) => (...args: never[]) => unknown): Branch {
  const root: Branch = {}
  // Leaves first, so groups attach to an existing function rather than replace it.
  const sorted = [...names].sort((a, b) => a.split('.').length - b.split('.').length)
  for (const name of sorted) {
    const parts = name.split('.')
    let node: Branch = root
    parts.forEach((part, i) => {
      if (i === parts.length - 1) {
        define(node, part, invoke(name))
        return
      }
      if (!Object.hasOwn(node, part)) define(node, part, {})
      node = node[part] as Branch
    })
  }
  return root
}

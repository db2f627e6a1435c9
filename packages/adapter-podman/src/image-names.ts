import type Docker from 'dockerode'

/**
 * True when an image reference names its registry (`quay.io/x`, `localhost/x`,
 * `host:5000/x`); short names like `berth-test:latest` or `library/node` do not.
 *
 * @example
 * ```ts
 * isQualifiedImage('localhost/berth-test:latest') // true
 * isQualifiedImage('berth-test:latest')           // false
 * ```
 */
export function isQualifiedImage(ref: string): boolean {
  const slash = ref.indexOf('/')
  if (slash < 0) return false
  const first = ref.slice(0, slash)
  return first === 'localhost' || first.includes('.') || first.includes(':')
}

/**
 * Podman's name for a locally built or imported image: `podman import`/`podman build`
 * store short names under `localhost/`. `berth-test` → `localhost/berth-test:latest`.
 *
 * @example
 * ```ts
 * localImageName('berth-test') // 'localhost/berth-test:latest'
 * ```
 */
export function localImageName(ref: string): string {
  if (isQualifiedImage(ref)) return ref
  const lastSegment = ref.slice(ref.lastIndexOf('/') + 1)
  const tagged = lastSegment.includes(':') || ref.includes('@') ? ref : `${ref}:latest`
  return `localhost/${tagged}`
}

/**
 * An image resolver for Podman: a short name that exists locally as `localhost/<name>` is
 * used under that name, so creating never falls into short-name resolution (which may
 * prompt, or try registries that are not reachable). Other names pass unchanged.
 * Answers are cached per name.
 *
 * @example
 * ```ts
 * const resolve = podmanImageResolver(docker)
 * await resolve('berth-test:latest') // 'localhost/berth-test:latest' when imported locally
 * ```
 */
export function podmanImageResolver(docker: Docker): (ref: string) => Promise<string> {
  const cache = new Map<string, string>()
  return async (ref) => {
    if (isQualifiedImage(ref)) return ref
    const hit = cache.get(ref)
    if (hit) return hit
    const local = localImageName(ref)
    try {
      await docker.getImage(local).inspect()
      cache.set(ref, local)
      return local
    } catch {
      return ref // not local: let Podman resolve it (and report it missing)
    }
  }
}

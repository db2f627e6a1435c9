import { Readable } from 'node:stream'
import { ContainerError, RECIPE_LABEL, type EnsureImageOptions, type ImageRecipe, type ImageReport } from '@berth/core'
import type { EngineContext } from './context.js'
import { statusOf } from './errors.js'

/** How long a pull may go without a word from the registry before it counts as failed. */
export const PULL_IDLE_TIMEOUT_MS = 15_000

/** After a failed pull, further calls fail the same way for this long instead of asking the registry again. */
export const PULL_RETRY_AFTER_MS = 30_000

/** How an engine names and finds images; Docker and Podman differ here. */
export interface ImageNaming {
  /** The name an image built here is tagged with (Podman keeps local images under `localhost/`). */
  localName?: (ref: string) => string
  /** Abort a pull after this long without progress (default {@link PULL_IDLE_TIMEOUT_MS}). */
  pullIdleTimeoutMs?: number
}

interface EngineImage {
  Id: string
  Config?: { Labels?: Record<string, string> | null } | null
}

/**
 * `repo:tag` split for the engine's tag endpoint; the tag defaults to `latest`.
 *
 * @example
 * ```ts
 * splitRef('localhost:5000/team/runner:1.2') // { repo: 'localhost:5000/team/runner', tag: '1.2' }
 * ```
 */
export function splitRef(ref: string): { repo: string; tag: string } {
  const slash = ref.lastIndexOf('/')
  const colon = ref.lastIndexOf(':')
  return colon > slash ? { repo: ref.slice(0, colon), tag: ref.slice(colon + 1) } : { repo: ref, tag: 'latest' }
}

/** The engine's progress stream (one JSON object per line) read to its end; rejects on an `error` line. */
async function readProgress(
  stream: Readable,
  onLine?: (line: Record<string, unknown>) => void,
): Promise<Record<string, unknown>[]> {
  const lines: Record<string, unknown>[] = []
  let rest = ''
  const take = (text: string) => {
    if (!text.trim()) return
    let parsed: Record<string, unknown>
    try {
      parsed = JSON.parse(text) as Record<string, unknown>
    } catch {
      return // not progress: ignore
    }
    lines.push(parsed)
    onLine?.(parsed)
  }
  for await (const chunk of stream) {
    rest += Buffer.from(chunk as Uint8Array).toString('utf8')
    const parts = rest.split('\n')
    rest = parts.pop() ?? ''
    for (const part of parts) take(part)
  }
  take(rest)
  const failed = lines.find(
    (l) => typeof l.error === 'string' || (l.errorDetail as { message?: string } | undefined)?.message,
  )
  if (failed) throw new Error(String(failed.error ?? (failed.errorDetail as { message: string }).message))
  return lines
}

/** An engine error's own message, shortened for one log line. */
function brief(err: unknown): string {
  const e = err as { json?: { message?: string } | null; message?: string }
  const text = (e?.json && typeof e.json === 'object' && e.json.message) || e?.message || String(err)
  const oneLine = text
    .replace(/^\(HTTP code \d+\)[^-]*- /, '')
    .replace(/\s+/g, ' ')
    .trim()
  return oneLine.length > 200 ? `${oneLine.slice(0, 197)}...` : oneLine
}

/**
 * `ensureImage` for an Engine-API runtime: inspect, else pull (aborted after a quiet
 * spell, so an air-gapped machine fails in moments), else import the recipe's root
 * filesystem (`POST /images/create?fromSrc=-` with `ENV`/`LABEL`/`CMD`/`WORKDIR` changes)
 * and tag it. An image Berth built from another recipe is rebuilt; the old one is then
 * removed unless something still uses it. Concurrent calls for one ref share one run.
 *
 * @example
 * ```ts
 * const ensureImage = imageProvisioner(ctx, { localName: (ref) => `localhost/${ref}` })
 * await ensureImage('berth-runner:latest', { recipe: hostImageRecipe() })
 * ```
 */
export function imageProvisioner(
  ctx: EngineContext,
  naming: ImageNaming = {},
): (ref: string, options?: EnsureImageOptions) => Promise<ImageReport> {
  const localName = naming.localName ?? ((ref: string) => ref)
  const idleMs = naming.pullIdleTimeoutMs ?? PULL_IDLE_TIMEOUT_MS
  const running = new Map<string, Promise<ImageReport>>()
  const failedPulls = new Map<string, { at: number; message: string }>()

  const inspect = async (ref: string): Promise<EngineImage | null> => {
    try {
      return (await ctx.docker.getImage(ref).inspect()) as EngineImage
    } catch (err) {
      if (statusOf(err) === 404) return null
      throw ctx.error(err, 'ensureImage', { image: ref })
    }
  }

  const pull = async (ref: string): Promise<void> => {
    const failed = failedPulls.get(ref)
    if (failed && Date.now() - failed.at < PULL_RETRY_AFTER_MS) throw new Error(failed.message)
    try {
      await pullNow(ref)
      failedPulls.delete(ref)
    } catch (err) {
      failedPulls.set(ref, { at: Date.now(), message: (err as Error).message })
      throw err
    }
  }

  const pullNow = async (ref: string): Promise<void> => {
    const ac = new AbortController()
    let timer: NodeJS.Timeout | undefined
    const quietFor = () => {
      clearTimeout(timer)
      timer = setTimeout(() => ac.abort(new Error(`no answer from the registry for ${idleMs / 1000} s`)), idleMs)
    }
    quietFor()
    try {
      const stream = (await ctx.docker.pull(ref, { abortSignal: ac.signal })) as unknown as Readable
      await readProgress(stream, quietFor)
    } catch (err) {
      throw new Error(ac.signal.aborted ? String((ac.signal.reason as Error).message) : brief(err))
    } finally {
      clearTimeout(timer)
    }
  }

  const build = async (ref: string, recipe: ImageRecipe, replaces: string | null): Promise<ImageReport> => {
    if (ref.includes('@')) {
      throw new ContainerError(
        'not_found',
        `${ctx.name}: image ${ref} is a digest reference and cannot be built here`,
        { image: ref },
      )
    }
    const changes = [
      ...Object.entries(recipe.env ?? {}).map(([k, v]) => `ENV ${k}=${v}`),
      `LABEL ${RECIPE_LABEL}=${recipe.hash}`,
      ...Object.entries(recipe.labels ?? {}).map(([k, v]) => `LABEL ${k}=${v}`),
      ...(recipe.cmd ? [`CMD ${JSON.stringify(recipe.cmd)}`] : []),
      ...(recipe.workingDir ? [`WORKDIR ${recipe.workingDir}`] : []),
    ]
    let id: string | undefined
    try {
      // Imported nameless, then tagged: Podman's compatible import ignores `tag` and files
      // short names under docker.io/library/, where its own resolver would not look.
      const body = Readable.from(recipe.rootfs(), { objectMode: false })
      const res = (await ctx.docker.importImage(body, { changes } as object)) as unknown as Readable
      const lines = await readProgress(res)
      id = lines.map((l) => String(l.id ?? l.status ?? '')).find((s) => /^sha256:[0-9a-f]{64}$/.test(s))
      if (!id) throw new Error(`the engine's import answer named no image id: ${JSON.stringify(lines).slice(0, 200)}`)
      await ctx.docker.getImage(id).tag(splitRef(ref))
    } catch (err) {
      throw ctx.error(err, 'ensureImage', { image: ref })
    }
    const made = await inspect(ref)
    if (!made || made.Config?.Labels?.[RECIPE_LABEL] !== recipe.hash) {
      throw new ContainerError(
        'engine_error',
        `${ctx.name}: image ${ref} was imported but does not carry recipe ${recipe.hash}`,
        { image: ref },
      )
    }
    // The image it replaces, unless a container or another tag still holds it (no force).
    if (replaces && replaces !== made.Id)
      await ctx.docker
        .getImage(replaces)
        .remove()
        .catch(() => {})
    return { ref, id: made.Id, source: 'built', recipe: recipe.hash }
  }

  const provision = async (ref: string, options: EnsureImageOptions): Promise<ImageReport> => {
    const { recipe, onProgress } = options
    const local = localName(ref)
    let name = local
    let found = await inspect(local)
    if (!found && local !== ref) {
      found = await inspect(ref)
      name = ref
    }
    if (found) {
      const have = found.Config?.Labels?.[RECIPE_LABEL]
      if (!recipe || !have || have === recipe.hash)
        return { ref: name, id: found.Id, source: 'present', ...(have && { recipe: have }) }
      onProgress?.(
        'building',
        `image ${local} was built from recipe ${have}; rebuilding it from ${recipe.description} (recipe ${recipe.hash})`,
      )
      return build(local, recipe, found.Id)
    }
    onProgress?.('pulling', `image ${ref} is not on the ${ctx.name} engine; pulling it`)
    let pullError: string
    try {
      await pull(ref)
      const pulled = await inspect(ref)
      if (pulled) return { ref, id: pulled.Id, source: 'pulled' }
      pullError = 'the pull ended without the image'
    } catch (err) {
      pullError = (err as Error).message
    }
    if (!recipe) {
      throw new ContainerError(
        'not_found',
        `${ctx.name}: image ${ref} is not on the engine and could not be pulled (${pullError})`,
        {
          image: ref,
          runtime: ctx.name,
        },
      )
    }
    onProgress?.(
      'building',
      `image ${ref} is not on the ${ctx.name} engine and no registry has it (${pullError}); building it from ${recipe.description} (recipe ${recipe.hash})`,
    )
    return build(local, recipe, null)
  }

  return (ref, options = {}) => {
    const key = `${ref}\0${options.recipe?.hash ?? ''}`
    let run = running.get(key)
    if (!run) {
      run = provision(ref, options).finally(() => running.delete(key))
      running.set(key, run)
    }
    return run
  }
}

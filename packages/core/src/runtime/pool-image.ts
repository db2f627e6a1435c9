import type { ContainerRuntime, ImageRecipe } from '../ports/container-runtime.js'
import { isContainerError } from './errors.js'
import type { Logger } from '../ports/logger.js'
import type { ImageHealth } from '@berth/contract'

/**
 * One line of an error, short enough for `/health` and logs.
 *
 * @example
 * ```ts
 * oneLine(new Error('a\n  b')) // 'a b'
 * ```
 */
export function oneLine(err: unknown): string {
  const text = (err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ').trim()
  return text.length > 300 ? `${text.slice(0, 297)}...` : text
}

/**
 * The pool's image, provisioned once through the runtime's `ensureImage` (present,
 * pulled, or built from the recipe): every creation awaits the same run, a failure lets
 * the next creation try again, and the state is kept for `/health`. Runtimes without
 * images (`local`) have nothing to provision.
 *
 * @example
 * ```ts
 * const image = new PoolImage({ runtime, ref: 'berth-runner:latest', recipe, logger })
 * await image.ready() // before creating a container from it
 * image.status()      // { ref: 'berth-runner:latest', state: 'ready' }
 * ```
 */
export class PoolImage {
  private state: ImageHealth
  private run: Promise<void> | null = null

  constructor(
    private readonly o: {
      runtime: ContainerRuntime
      ref: string
      recipe?: ImageRecipe | undefined
      logger: Logger
      /** Told when provisioning found the engine unreachable. */
      onUnreachable?: (err: unknown) => void
    },
  ) {
    this.state = { ref: o.ref, state: 'unknown' }
  }

  /** For `/health`; `undefined` when the runtime has no images. */
  status(): ImageHealth | undefined {
    return this.o.runtime.ensureImage ? { ...this.state } : undefined
  }

  /** The image was found missing after all (removed meanwhile): provision again next time. */
  invalidate(): void {
    this.run = null
  }

  /** Resolves once the image is there; one provisioning at a time. */
  ready(): Promise<void> {
    const { runtime: rt, ref, recipe, logger } = this.o
    if (!rt.ensureImage) return Promise.resolve()
    if (this.run) return this.run
    const started = performance.now()
    this.state = { ref, state: 'checking' }
    this.run = rt
      .ensureImage(ref, {
        recipe,
        onProgress: (stage, message) => {
          this.state = { ref, state: stage }
          // A pull that fails is quiet: the build line says why it was needed.
          if (stage === 'building') logger.info(message, { runtime: rt.name, image: ref })
        },
      })
      .then(
        (report) => {
          this.state = { ref: report.ref, state: 'ready' }
          if (report.source === 'present') return
          const seconds = Math.round((performance.now() - started) / 100) / 10
          logger.info(`image ${report.ref} ${report.source} in ${seconds} s`, {
            runtime: rt.name,
            image: report.ref,
            source: report.source,
            recipe: report.recipe,
          })
        },
        (err: unknown) => {
          this.run = null
          this.state = { ref, state: 'failed', error: oneLine(err) }
          logger.warn('could not provision the image', { runtime: rt.name, image: ref, error: oneLine(err) })
          if (isContainerError(err, 'unreachable')) this.o.onUnreachable?.(err)
          throw err
        },
      )
    return this.run
  }
}

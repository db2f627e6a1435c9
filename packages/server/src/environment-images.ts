import { createHash } from 'node:crypto'
import { validationError, type ContainerRuntime, type EnvironmentImages, type ImageRecipe } from '@berth/core'

/** How environments get their images on an engine. */
export interface EnvironmentImagesOptions {
  runtime: ContainerRuntime
  /** The pool's image: environments that name neither an image nor packages use it. */
  defaultRef: string
  /** A recipe for the host image plus packages (e.g. `(p) => hostImageRecipe({ packages: p })`); without it, `packages` is refused. */
  recipe?: (packages: readonly string[]) => ImageRecipe
}

/**
 * Environment images on an engine with `ensureImage`: a named `image` is reused or pulled;
 * `packages` build the host image plus those packages as `berth-env:<hash>` (the recipe's
 * content hash, so equal environments share one image, built once). Runtimes without
 * images (`local`) use the host for every environment.
 *
 * @example
 * ```ts
 * const images = environmentImages({ runtime, defaultRef: 'berth-runner:latest', recipe: (p) => hostImageRecipe({ packages: p }) })
 * images.plan({ image: null, packages: ['jq'] }).ref // 'berth-env:3f2a…'
 * ```
 */
export function environmentImages(o: EnvironmentImagesOptions): EnvironmentImages {
  const ensure = o.runtime.ensureImage?.bind(o.runtime)
  return {
    defaultRef: o.defaultRef,
    plan({ image, packages }) {
      if (image) return { ref: image, hash: null, provision: async () => void (await ensure?.(image)) }
      if (!packages.length) return { ref: o.defaultRef, hash: null, provision: async () => {} }
      if (!o.recipe || !ensure) {
        throw validationError([
          {
            location: 'body',
            path: 'packages',
            message: `this server cannot build images with packages (runtime ${o.runtime.name}); name an image instead`,
          },
        ])
      }
      let recipe: ImageRecipe
      try {
        recipe = o.recipe(packages)
      } catch (err) {
        throw validationError([{ location: 'body', path: 'packages', message: (err as Error).message }])
      }
      const hash = createHash('sha256').update(recipe.hash).digest('hex').slice(0, 16)
      const ref = `berth-env:${hash}`
      return { ref, hash: recipe.hash, provision: async () => void (await ensure(ref, { recipe })) }
    },
  }
}

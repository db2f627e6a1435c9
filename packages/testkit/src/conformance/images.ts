/** Conformance: `ensureImage` (reuse, build from a recipe once, rebuild on a new recipe, a clear failure). */
import { IDLE_COMMAND } from '@berth/core'
import { beforeAll, describe, expect, it } from 'vitest'
import { busyboxRecipe } from '../image-recipe.js'
import { closedPort, expectContainerFailure, type Suite } from './suite.js'

/** Registers the cases of this concern in the current `describe` block. */
export function imageCases(s: Suite): void {
  const { make, sh, run, runLabels, opts, name, builtImages } = s
  if (opts.images) {
    describe('images', () => {
      let registry: string // host:port of a "registry" that refuses every connection

      beforeAll(async () => {
        expect(s.rt.ensureImage, `${name} says it has images, but has no ensureImage`).toBeTypeOf('function')
        registry = `127.0.0.1:${await closedPort()}`
      })

      it('ensureImage uses a present image as it is: no pull, no build', async () => {
        const recipe = busyboxRecipe(`unused-${run}`, 'unused')
        const stages: string[] = []
        const report = await s.rt.ensureImage!(opts.image, { recipe, onProgress: (stage) => stages.push(stage) })
        expect(report.source).toBe('present')
        expect(report.id).toMatch(/^sha256:[0-9a-f]{64}$/)
        expect(recipe.builds).toBe(0)
        expect(stages).toEqual([])
      })

      it('builds a missing image no registry has from the recipe, once for concurrent callers; containers run it', async () => {
        const ref = `${registry}/berth-conformance-${run}:v1`
        builtImages.push(ref)
        const recipe = busyboxRecipe(`conf-${run}-1`, 'first recipe')
        const stages: string[] = []
        const reports = await Promise.all([
          s.rt.ensureImage!(ref, { recipe, onProgress: (stage) => stages.push(stage) }),
          s.rt.ensureImage!(ref, { recipe }),
          s.rt.ensureImage!(ref, { recipe }),
        ])
        expect(recipe.builds).toBe(1)
        expect(stages).toEqual(['pulling', 'building'])
        expect(reports[0]).toMatchObject({ ref, source: 'built', recipe: `conf-${run}-1` })
        expect(reports[1]).toEqual(reports[0])
        expect(reports[2]).toEqual(reports[0])

        const id = await make({ image: ref })
        expect((await sh(id, 'cat /marker; echo "|$PATH"')).stdout).toBe('first recipe|/bin\n')

        // Built already: reused, not rebuilt.
        const again = await s.rt.ensureImage!(ref, { recipe })
        expect(again).toMatchObject({ ref, id: reports[0]!.id, source: 'present', recipe: `conf-${run}-1` })
        expect(recipe.builds).toBe(1)
      })

      it('rebuilds an image Berth built from another recipe; a container of the old one keeps running', async () => {
        const ref = `${registry}/berth-conformance-${run}:v2`
        builtImages.push(ref)
        const first = await s.rt.ensureImage!(ref, { recipe: busyboxRecipe(`conf-${run}-a`, 'recipe a') })
        builtImages.push(first.id) // kept untagged while its container runs
        const old = await make({ image: ref })
        const changed = busyboxRecipe(`conf-${run}-b`, 'recipe b')
        const second = await s.rt.ensureImage!(ref, { recipe: changed })
        expect(second).toMatchObject({ ref, source: 'built', recipe: `conf-${run}-b` })
        expect(second.id).not.toBe(first.id)
        expect(changed.builds).toBe(1)
        expect((await sh(await make({ image: ref }), 'cat /marker')).stdout).toBe('recipe b')
        expect((await sh(old, 'cat /marker')).stdout).toBe('recipe a')
      })

      it('a missing image that cannot be pulled and has no recipe is CONTAINER_FAILED not_found, naming it', async () => {
        const ref = `${registry}/berth-conformance-absent-${run}:v1`
        const details = await expectContainerFailure(s.rt.ensureImage!(ref), 'not_found')
        expect(details.image).toBe(ref)
        await expectContainerFailure(
          s.rt.create({ image: ref, cmd: [...IDLE_COMMAND], labels: runLabels, isolation: opts.isolation }),
        )
      })
    })
  }
}

/**
 * What the production runner ships: the offline model comes from `@berth/stub-model`,
 * nothing from the test kit (global-setup built dist/ from this checkout).
 */
import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const read = (path: string) => readFileSync(fileURLToPath(new URL(path, import.meta.url)), 'utf8')

describe('the runner program and package', () => {
  it('dist/runner.cjs inlines @berth/stub-model and nothing from @berth/testkit', () => {
    const main = read('../dist/runner.cjs')
    expect(main).toContain('// ../stub-model/src/server.ts')
    expect(main).not.toMatch(/testkit/)
  })

  it('no runner source imports @berth/testkit', () => {
    const sources = readdirSync(fileURLToPath(new URL('../src', import.meta.url)), {
      recursive: true,
      encoding: 'utf8',
    }).filter((f) => f.endsWith('.ts'))
    expect(sources).toContain('run.ts')
    for (const file of sources) expect(read(`../src/${file}`), file).not.toMatch(/['"]@berth\/testkit/)
  })

  it('depends on @berth/stub-model; @berth/testkit is for its tests only', () => {
    const pkg = JSON.parse(read('../package.json')) as {
      dependencies: Record<string, string>
      devDependencies: Record<string, string>
    }
    expect(pkg.dependencies).toHaveProperty('@berth/stub-model')
    expect(pkg.dependencies).not.toHaveProperty('@berth/testkit')
  })
})

/**
 * The house rules of the whole source tree (issue: core by domain): no import circle between
 * source files and no source file over the line limit. The checker is `scripts/structure.mjs`
 * (`node scripts/structure.mjs` prints the offenders); its own cases below prove it can fail.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
// @ts-expect-error: a plain .mjs script without declarations
import { MAX_LINES, importCircles, longFiles, sourceFiles } from '../../../scripts/structure.mjs'

const ROOT = resolve(import.meta.dirname, '../../..')
const rel = (f: string) => relative(ROOT, f)

describe('the source tree', () => {
  const files: string[] = sourceFiles(ROOT)

  it('is read: every package contributes source files', () => {
    expect(files.some((f) => rel(f).startsWith('packages/core/src/tasks/'))).toBe(true)
    expect(files.some((f) => rel(f).startsWith('packages/server/src/'))).toBe(true)
  })

  it('has no import circle', () => {
    expect(importCircles(files).map((c: string[]) => c.map(rel))).toEqual([])
  })

  it(`has no source file over ${MAX_LINES} lines`, () => {
    expect(longFiles(files).map((f: { file: string; lines: number }) => `${rel(f.file)}: ${f.lines}`)).toEqual([])
  })
})

describe('the checker', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-structure-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const write = (path: string, text: string) => {
    mkdirSync(join(dir, path, '..'), { recursive: true })
    writeFileSync(join(dir, path), text)
  }
  write('packages/p/src/a.ts', "import type { B } from './b.js'\nexport type A = B\n")
  write('packages/p/src/b.ts', "import { c } from './dir/index.js'\nexport type B = string\nexport const x = c\n")
  write('packages/p/src/dir/index.ts', "export { a } from '../a.js'\nexport const c = 1\n")
  write(
    'packages/p/src/free.ts',
    `import { c } from './dir/index.js'\nexport const d = c\n${'// line\n'.repeat(MAX_LINES)}`,
  )
  write('packages/p/test/ignored.test.ts', `import { d } from '../src/free.js'\n${'// line\n'.repeat(MAX_LINES * 2)}`)

  it('finds a circle through a type import and a folder index, and nothing else', () => {
    const circles = importCircles(sourceFiles(dir)).map((c: string[]) => c.map((f) => relative(dir, f)))
    expect(circles).toEqual([['packages/p/src/a.ts', 'packages/p/src/b.ts', 'packages/p/src/dir/index.ts']])
  })

  it('finds the long source file and leaves tests out', () => {
    expect(longFiles(sourceFiles(dir)).map((f: { file: string }) => relative(dir, f.file))).toEqual([
      'packages/p/src/free.ts',
    ])
  })
})

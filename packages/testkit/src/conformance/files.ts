/** Conformance: the file operations (list, read, archive, write), confined to their root. */
import { createHash, randomBytes } from 'node:crypto'
import type { ContainerRuntime } from '@berth/core'
import { beforeAll, describe, expect, it } from 'vitest'
import { readTar } from '../tar.js'
import { expectPathProblem, type Suite } from './suite.js'

const enc = new TextEncoder()

async function* chunks(...parts: (string | Uint8Array)[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield typeof p === 'string' ? enc.encode(p) : p
}

/** Registers the cases of this concern in the current `describe` block. */
export function fileCases(s: Suite): void {
  describe('file operations', () => {
    // A root inside the workspace, with a sibling outside it that links lead to.
    const root = '/workspace/box'
    let id: string
    let rt: ContainerRuntime
    const ls = async (dir: string) =>
      (await s.sh(id, `ls -A ${dir} 2>/dev/null`)).stdout.split('\n').filter(Boolean).sort()

    beforeAll(async () => {
      rt = s.rt
      id = await s.make()
      const setup = await s.sh(
        id,
        [
          'mkdir -p box/src/deep outside box/empty',
          'printf hello > box/src/a.txt',
          'printf secret > outside/secret.txt',
          'printf dot > box/.hidden',
          'ln -s src/a.txt box/link-in',
          'ln -s ../outside box/link-out',
          'ln -s / box/link-root',
          'ln -s nowhere box/dangling',
        ].join(' && '),
      )
      expect(setup.exitCode, setup.stderr).toBe(0)
    })

    it('lists a directory: names sorted, dotfiles included, types, sizes and mtimes', async () => {
      const listing = await rt.listFiles(id, root, '')
      const byName = new Map(listing.entries.map((e) => [e.name, e]))
      expect(listing.entries.map((e) => e.name)).toEqual([
        '.hidden',
        'dangling',
        'empty',
        'link-in',
        'link-out',
        'link-root',
        'src',
      ])
      expect(listing.truncated).toBe(false)
      expect(byName.get('src')?.type).toBe('directory')
      expect(byName.get('.hidden')).toMatchObject({ type: 'file', size: 3 })
      expect(byName.get('link-in')).toMatchObject({ type: 'symlink', size: 'src/a.txt'.length })
      expect(Date.parse(byName.get('.hidden')!.mtime)).toBeGreaterThan(Date.now() - 10 * 60_000)
      // Absolute paths under the root and `.` segments name the same directory.
      expect((await rt.listFiles(id, root, `${root}/./src`)).entries.map((e) => [e.name, e.type, e.size])).toEqual([
        ['a.txt', 'file', 5],
        ['deep', 'directory', expect.any(Number)],
      ])
      expect(await rt.listFiles(id, root, 'empty')).toEqual({ entries: [], truncated: false })
      const few = await rt.listFiles(id, root, '', { maxEntries: 2 })
      expect(few).toEqual({ entries: listing.entries.slice(0, 2), truncated: true })
    })

    it('refuses missing paths, files listed as directories and directories read as files', async () => {
      await expectPathProblem(rt.listFiles(id, root, 'absent'), 'missing')
      await expectPathProblem(rt.listFiles(id, root, 'dangling'), 'missing')
      await expectPathProblem(rt.listFiles(id, root, 'src/a.txt'), 'not_directory')
      await expectPathProblem(rt.readFile(id, root, 'src'), 'is_directory')
      await expectPathProblem(rt.readFile(id, root, 'src/absent.txt'), 'missing')
      await expectPathProblem(rt.archiveFiles(id, root, ['src/a.txt', 'absent']), 'missing')
    })

    it('confines every operation to its root: `..`, other absolute paths and links out are refused', async () => {
      for (const path of ['..', 'src/../..', '/workspace/outside', 'link-out', 'link-out/secret.txt', 'link-root']) {
        await expectPathProblem(rt.listFiles(id, root, path), 'outside')
        await expectPathProblem(rt.readFile(id, root, path), 'outside')
        await expectPathProblem(rt.archiveFiles(id, root, ['src', path]), 'outside')
      }
      for (const dir of ['link-out', 'link-out/new', '../outside']) {
        const write = await rt.writeFiles(id, root)
        await write.add(chunks('escaped'))
        await expectPathProblem(write.commit(dir, ['x.txt']), 'outside')
        await write.discard()
      }
      const one = await rt.writeFiles(id, root)
      await one.add(chunks('escaped'))
      await expectPathProblem(one.commitOne('link-out/y.txt', 'y.txt'), 'outside')
      await one.discard()
      expect(await ls('outside')).toEqual(['secret.txt'])
      // A link that stays inside is followed.
      expect(Buffer.from(await rt.readFile(id, root, 'link-in')).toString()).toBe('hello')
    })

    it('reads a file whole, binary-safe, within a size limit', async () => {
      const blob = randomBytes(300 * 1024)
      const write = await rt.writeFiles(id, root)
      expect(await write.add(chunks(blob.subarray(0, 1000), blob.subarray(1000)))).toBe(blob.length)
      await write.commit('bin', ['blob.bin'])
      const read = await rt.readFile(id, root, 'bin/blob.bin')
      expect(createHash('sha256').update(read).digest('hex')).toBe(createHash('sha256').update(blob).digest('hex'))
      expect(Buffer.from(await rt.readFile(id, root, `${root}/src/a.txt`)).toString()).toBe('hello')
      await expectPathProblem(rt.readFile(id, root, 'bin/blob.bin', { maxBytes: 1000 }), 'too_large')
    })

    it('archives paths named relative to the root, the root itself as `.`', async () => {
      const entries = await readTar(await rt.archiveFiles(id, root, ['src', 'link-in', '.hidden']))
      const names = entries.map((e) => e.name)
      expect(names).toEqual(expect.arrayContaining(['src/', 'src/a.txt', 'src/deep/', '.hidden']))
      expect(entries.find((e) => e.name === 'src/a.txt')?.content.toString()).toBe('hello')
      // A link inside the root is archived as what it points to, under the name asked for.
      expect(entries.find((e) => e.name === 'link-in')?.content.toString()).toBe('hello')
      const whole = (await readTar(await rt.archiveFiles(id, root, ['']))).map((e) => e.name)
      expect(whole).toEqual(expect.arrayContaining(['./', './src/a.txt', './.hidden']))
      expect(whole.some((n) => n.includes('secret'))).toBe(false)
    })

    it('writes files in two steps: staged as they arrive, moved into place (directories made) on commit', async () => {
      const write = await rt.writeFiles(id, root)
      expect(await write.add(chunks('one ', 'two'))).toBe(7)
      expect(await write.add(chunks(''))).toBe(0)
      expect(await ls('box/up')).toEqual([])
      await write.commit('up/nested', ['first.txt', 'empty.txt'])
      expect(await ls('box/up/nested')).toEqual(['empty.txt', 'first.txt'])
      expect(Buffer.from(await rt.readFile(id, root, 'up/nested/first.txt')).toString()).toBe('one two')
      await write.discard() // committed: nothing to drop
      expect(await ls('box/up/nested')).toEqual(['empty.txt', 'first.txt'])
      expect(await ls('box/.berth/uploads')).toEqual([])

      // Replacing a file is fine; a directory in the way is refused, naming it, and nothing moves.
      const again = await rt.writeFiles(id, root)
      await again.add(chunks('new'))
      await again.add(chunks('x'))
      const details = await expectPathProblem(again.commit('up', ['other.txt', 'nested']), 'is_directory')
      expect(details).toMatchObject({ path: 'up/nested', index: 1 })
      await again.discard()
      expect(await ls('box/up')).toEqual(['nested'])
      expect(await ls('box/.berth/uploads')).toEqual([])
    })

    it('writes one file to a path, or into it when it is a directory', async () => {
      const toPath = await rt.writeFiles(id, root)
      await toPath.add(chunks('renamed'))
      expect(await toPath.commitOne('single/name.txt', 'upload.bin')).toBe('single/name.txt')
      expect(Buffer.from(await rt.readFile(id, root, 'single/name.txt')).toString()).toBe('renamed')

      const intoDir = await rt.writeFiles(id, root)
      await intoDir.add(chunks('inside'))
      expect(await intoDir.commitOne('single', 'kept-name.txt')).toBe('single/kept-name.txt')
      expect(await ls('box/single')).toEqual(['kept-name.txt', 'name.txt'])

      const blocked = await rt.writeFiles(id, root)
      await blocked.add(chunks('x'))
      await s.sh(id, 'mkdir -p box/single/taken.txt')
      await expectPathProblem(blocked.commitOne('single', 'taken.txt'), 'is_directory')
      await blocked.discard()
      expect(await ls('box/.berth/uploads')).toEqual([])
    })

    it('a failing body rejects with its own error, and discard leaves nothing staged', async () => {
      const write = await rt.writeFiles(id, root)
      const boom = new Error('the client went away')
      async function* broken(): AsyncGenerator<Uint8Array> {
        yield enc.encode('partial')
        throw boom
      }
      await expect(write.add(broken())).rejects.toBe(boom)
      await write.discard()
      expect(await ls('box/.berth/uploads')).toEqual([])
      expect(await ls('box')).not.toContain('partial')
    })
  })
}

import { describe, expect, it } from 'vitest'
import { parseInput, underRoot } from '../src/input.js'
import { makeInput } from './helpers.js'

const input = parseInput(JSON.stringify(makeInput('hi', { cwd: '/workspace', events_file: '.berth/events/t1.jsonl' })))

describe('container root (the unsandboxed local runtime)', () => {
  it('puts cwd and the events file under BERTH_CONTAINER_ROOT', () => {
    const moved = underRoot(input, '/srv/berth/containers/ab12/root')
    expect(moved.cwd).toBe('/srv/berth/containers/ab12/root/workspace')
    expect(moved.events_file).toBe('/srv/berth/containers/ab12/root/workspace/.berth/events/t1.jsonl')
    expect(moved.prompt).toBe('hi')
  })

  it('leaves the container paths alone without a root', () => {
    expect(underRoot(input, undefined)).toEqual(input)
    expect(underRoot(input, '')).toEqual(input)
  })
})

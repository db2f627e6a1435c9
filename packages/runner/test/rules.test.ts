import { describe, expect, it } from 'vitest'
import { autoAllowed, firstMatch, parseRule, ruleMatches } from '../src/rules.js'

describe('tool rules (the SDK permission syntax)', () => {
  it('parses a tool name, with or without content', () => {
    expect(parseRule('Bash')).toEqual({ tool: 'Bash' })
    expect(parseRule('Bash(git push:*)')).toEqual({ tool: 'Bash', content: 'git push:*' })
    expect(parseRule(' Write(/workspace/secret/**) ')).toEqual({ tool: 'Write', content: '/workspace/secret/**' })
    expect(parseRule('Bash()')).toEqual({ tool: 'Bash' })
  })

  it('matches a bare tool name to every call of that tool only', () => {
    expect(ruleMatches('Bash', 'Bash', { command: 'ls' })).toBe(true)
    expect(ruleMatches('Bash', 'BashOutput', {})).toBe(false)
    expect(ruleMatches('Bash', 'Read', { file_path: '/x' })).toBe(false)
  })

  it('matches a Bash prefix rule on any simple command of the line, on word boundaries', () => {
    const rule = 'Bash(git push:*)'
    expect(ruleMatches(rule, 'Bash', { command: 'git push' })).toBe(true)
    expect(ruleMatches(rule, 'Bash', { command: 'git push origin main' })).toBe(true)
    expect(ruleMatches(rule, 'Bash', { command: 'cd repo && git push --force' })).toBe(true)
    expect(ruleMatches(rule, 'Bash', { command: 'git status; git push' })).toBe(true)
    expect(ruleMatches(rule, 'Bash', { command: 'git pushy' })).toBe(false)
    expect(ruleMatches(rule, 'Bash', { command: 'git status' })).toBe(false)
    expect(ruleMatches(rule, 'Bash', {})).toBe(false)
  })

  it('matches an exact Bash rule on the whole command only', () => {
    expect(ruleMatches('Bash(npm test)', 'Bash', { command: 'npm test' })).toBe(true)
    expect(ruleMatches('Bash(npm test)', 'Bash', { command: ' npm test ' })).toBe(true)
    expect(ruleMatches('Bash(npm test)', 'Bash', { command: 'npm test -- --watch' })).toBe(false)
  })

  it('globs tool names, and a bare MCP server covers its tools', () => {
    expect(ruleMatches('mcp__pay__*', 'mcp__pay__charge', {})).toBe(true)
    expect(ruleMatches('mcp__pay__*', 'mcp__payroll__run', {})).toBe(false)
    expect(ruleMatches('mcp__pay', 'mcp__pay__refund', {})).toBe(true)
    expect(ruleMatches('mcp__pay', 'mcp__payroll__run', {})).toBe(false)
    expect(ruleMatches('mcp__*', 'mcp__git__push', {})).toBe(true)
  })

  it('matches file tools on a path glob', () => {
    const rule = 'Write(/workspace/secret/**)'
    expect(ruleMatches(rule, 'Write', { file_path: '/workspace/secret/a/b.txt' })).toBe(true)
    expect(ruleMatches(rule, 'Write', { file_path: '/workspace/public/a.txt' })).toBe(false)
    expect(ruleMatches(rule, 'Edit', { file_path: '/workspace/secret/a.txt' })).toBe(false)
    expect(ruleMatches('Edit(/workspace/*.env)', 'Edit', { file_path: '/workspace/.env' })).toBe(true)
    expect(ruleMatches('Edit(/workspace/*.env)', 'Edit', { file_path: '/workspace/sub/.env' })).toBe(false)
  })

  it('asks on content it cannot interpret rather than letting the call through', () => {
    expect(ruleMatches('WebFetch(domain:example.com)', 'WebFetch', { url: 'https://other.test' })).toBe(true)
  })

  it('finds the first matching rule', () => {
    expect(firstMatch(['Bash(git push:*)', 'mcp__pay__*'], 'mcp__pay__charge', {})).toBe('mcp__pay__*')
    expect(firstMatch(['Bash(git push:*)'], 'Bash', { command: 'ls' })).toBeUndefined()
  })

  it('takes out of auto-allow every allowed entry a rule could cover', () => {
    expect(autoAllowed(['Bash', 'Read', 'Write'], ['Bash(git push:*)'])).toEqual(['Read', 'Write'])
    expect(autoAllowed(['Bash(npm test)', 'Read'], ['Bash'])).toEqual(['Read'])
    expect(autoAllowed(['mcp__pay', 'mcp__git__log', 'Read'], ['mcp__pay__*'])).toEqual(['mcp__git__log', 'Read'])
    expect(autoAllowed(['mcp__pay__charge', 'Read'], ['mcp__pay__*'])).toEqual(['Read'])
    expect(autoAllowed(['mcp__*', 'Read'], ['mcp__pay__charge'])).toEqual(['Read'])
    expect(autoAllowed(['Read', 'Write'], [])).toEqual(['Read', 'Write'])
  })
})

/** The fairness settings (issue 29): per-caller caps and the memory budget, their defaults and their refusals. */
import { totalmem } from 'node:os'
import { configFromEnv } from '@berth/server'
import { expect, it } from 'vitest'

it('defaults to half the pool per caller and a memory budget of the host less the reserve', () => {
  const c = configFromEnv({})
  expect(c.callerCaps).toEqual({ maxRunning: null, poolShare: 0.5 })
  expect(c.memoryBudgetMb).toBe(Math.max(256, Math.floor(totalmem() / 1024 ** 2) - 2048))
  expect(configFromEnv({ BERTH_MEMORY_RESERVE_MB: '4096' }).memoryBudgetMb).toBe(
    Math.max(256, Math.floor(totalmem() / 1024 ** 2) - 4096),
  )
})

it('reads the caps and the budget, 0 meaning none', () => {
  const c = configFromEnv({
    BERTH_CALLER_MAX_RUNNING: '4',
    BERTH_CALLER_POOL_SHARE: '0.25',
    BERTH_MEMORY_BUDGET_MB: '8192',
  })
  expect(c.callerCaps).toEqual({ maxRunning: 4, poolShare: 0.25 })
  expect(c.memoryBudgetMb).toBe(8192)
  const none = configFromEnv({
    BERTH_CALLER_MAX_RUNNING: '0',
    BERTH_CALLER_POOL_SHARE: '0',
    BERTH_MEMORY_BUDGET_MB: '0',
  })
  expect(none.callerCaps).toEqual({ maxRunning: null, poolShare: null })
  expect(none.memoryBudgetMb).toBeNull()
})

it('refuses a share over the whole pool and values that are not numbers, naming the setting', () => {
  expect(() => configFromEnv({ BERTH_CALLER_POOL_SHARE: '1.5' })).toThrow(/BERTH_CALLER_POOL_SHARE.*between 0 and 1/)
  expect(() => configFromEnv({ BERTH_CALLER_MAX_RUNNING: 'many' })).toThrow(/BERTH_CALLER_MAX_RUNNING/)
  expect(() => configFromEnv({ BERTH_MEMORY_BUDGET_MB: '-1' })).toThrow(/BERTH_MEMORY_BUDGET_MB/)
})

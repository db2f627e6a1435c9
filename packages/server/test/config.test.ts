import { expect, it } from 'vitest'
import { configFromEnv } from '@berth/server'

it('reads the embedded defaults and every variable, refusing values that cannot be right', () => {
  const d = configFromEnv({})
  expect(d).toMatchObject({ port: 3000, host: '127.0.0.1', storage: 'fs', runtime: 'auto', runner: 'bundle', rateRpm: 60, rateBurst: 10, concurrency: 5, poolMin: 0, poolMax: 20, smtp: undefined, allowPrivateWebhooks: false })
  const c = configFromEnv({
    PORT: '8080',
    BERTH_SMTP_URL: 'smtp://mailer:p%40ss@mail.internal:2525',
    BERTH_SMTP_FROM: 'Berth <berth@example.com>',
    BERTH_ALLOW_PRIVATE_WEBHOOKS: 'true',
    BERTH_RUNNER: 'image',
  })
  expect(c).toMatchObject({
    port: 8080,
    runner: 'image',
    allowPrivateWebhooks: true,
    smtp: { host: 'mail.internal', port: 2525, secure: false, auth: { user: 'mailer', pass: 'p@ss' }, from: 'Berth <berth@example.com>' },
  })
  expect(configFromEnv({ BERTH_SMTP_URL: 'smtps://relay', BERTH_SMTP_FROM: 'a@b.c' }).smtp).toMatchObject({ port: 465, secure: true })
  for (const [env, message] of [
    [{ PORT: 'eighty' }, /PORT/],
    [{ BERTH_POOL_MIN: '5', BERTH_POOL_MAX: '2' }, /BERTH_POOL_MIN/],
    [{ BERTH_STORAGE: 'redis' }, /BERTH_REDIS_URL/],
    [{ BERTH_RUNTIME: 'kubernetes' }, /BERTH_RUNTIME/],
    [{ BERTH_SMTP_URL: 'http://x' }, /smtp/],
    [{ BERTH_SMTP_URL: 'smtp://x' }, /BERTH_SMTP_FROM/],
    [{ BERTH_ALLOW_PRIVATE_WEBHOOKS: 'yes' }, /BERTH_ALLOW_PRIVATE_WEBHOOKS/],
  ] as const) {
    expect(() => configFromEnv(env as Record<string, string>)).toThrow(message)
  }
})

it('reads BERTH_POOL_NAME (unset: derived from the data dir at start), refusing names a label cannot carry', () => {
  expect(configFromEnv({}).poolName).toBeUndefined()
  expect(configFromEnv({ BERTH_POOL_NAME: 'team-a.pool_1' }).poolName).toBe('team-a.pool_1')
  for (const bad of ['-lead', 'has space', 'a/b', 'x'.repeat(64)]) {
    expect(() => configFromEnv({ BERTH_POOL_NAME: bad })).toThrow(/BERTH_POOL_NAME/)
  }
})

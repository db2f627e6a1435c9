import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it, onTestFinished } from 'vitest'
import { SETTINGS, configFromEnv } from '@berth/server'

it('reads the embedded defaults and every variable, refusing values that cannot be right', () => {
  const d = configFromEnv({})
  expect(d).toMatchObject({
    port: 3000,
    host: '127.0.0.1',
    storage: 'fs',
    runtime: 'auto',
    runner: 'bundle',
    rateRpm: 60,
    rateBurst: 10,
    concurrency: 5,
    poolMax: 20,
    warmIdleS: 600,
    smtp: undefined,
    allowPrivateWebhooks: false,
  })
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
    smtp: {
      host: 'mail.internal',
      port: 2525,
      secure: false,
      auth: { user: 'mailer', pass: 'p@ss' },
      from: 'Berth <berth@example.com>',
    },
  })
  expect(configFromEnv({ BERTH_SMTP_URL: 'smtps://relay', BERTH_SMTP_FROM: 'a@b.c' }).smtp).toMatchObject({
    port: 465,
    secure: true,
  })
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

it('keeps the warm path on by default, sized by the memory budget; 0 turns each part off', () => {
  // 2 GiB containers: 10 fit in 22,000 MiB, 3 in 6,000, 1 in 2,048.
  const sized = (env: Record<string, string>) => {
    const c = configFromEnv(env)
    return { poolMin: c.poolMin, warmAgents: c.warmAgents }
  }
  expect(sized({ BERTH_MEMORY_BUDGET_MB: '22000' })).toEqual({ poolMin: 2, warmAgents: 4 })
  expect(sized({ BERTH_MEMORY_BUDGET_MB: '6000' })).toEqual({ poolMin: 1, warmAgents: 1 })
  expect(sized({ BERTH_MEMORY_BUDGET_MB: '2048' })).toEqual({ poolMin: 0, warmAgents: 0 })
  // Smaller containers fit more; the pool's max bounds both.
  expect(sized({ BERTH_MEMORY_BUDGET_MB: '6000', BERTH_ENV_MAX_MEMORY_MB: '512' })).toEqual({
    poolMin: 2,
    warmAgents: 4,
  })
  expect(sized({ BERTH_MEMORY_BUDGET_MB: '22000', BERTH_POOL_MAX: '3' })).toEqual({ poolMin: 1, warmAgents: 1 })
  expect(sized({ BERTH_MEMORY_BUDGET_MB: '22000', BERTH_WARM_AGENTS: '0', BERTH_POOL_MIN: '0' })).toEqual({
    poolMin: 0,
    warmAgents: 0,
  })
  expect(sized({ BERTH_MEMORY_BUDGET_MB: '22000', BERTH_RUNTIME: 'local' })).toEqual({ poolMin: 0, warmAgents: 4 })
  expect(configFromEnv({ BERTH_WARM_IDLE_S: '30' }).warmIdleS).toBe(30)
  expect(() => configFromEnv({ BERTH_WARM_IDLE_S: '0' })).toThrow(/BERTH_WARM_IDLE_S/)
})

it("derives a self-hosted Git instance's endpoints from its web address; explicit URLs win; BERTH_PUBLIC_URL makes the redirect URIs", () => {
  const c = configFromEnv({
    BERTH_PUBLIC_URL: 'https://berth.example.com/',
    BERTH_GITHUB_CLIENT_ID: 'gh-id',
    BERTH_GITHUB_CLIENT_SECRET: 'gh-secret',
    BERTH_GITHUB_URL: 'https://github.example.com/',
    BERTH_GITLAB_CLIENT_ID: 'gl-id',
    BERTH_GITLAB_CLIENT_SECRET: 'gl-secret',
    BERTH_GITLAB_URL: 'https://gitlab.example.com:8443',
    BERTH_GITLAB_API_URL: 'https://gitlab-api.example.com/api/v4',
    BERTH_GITLAB_SCOPES: 'read_user, read_repository',
    BERTH_CHAT_CLIENT_ID: 'c-id',
    BERTH_CHAT_CLIENT_SECRET: 'c-secret',
    BERTH_CHAT_URL: 'https://chat.example.com',
    BERTH_MESSENGER_API_URL: 'https://bots.example.com',
  })
  expect(c.gitProviders).toEqual({
    github: {
      clientId: 'gh-id',
      clientSecret: 'gh-secret',
      authorizeUrl: 'https://github.example.com/login/oauth/authorize',
      tokenUrl: 'https://github.example.com/login/oauth/access_token',
      apiBaseUrl: 'https://github.example.com/api/v3',
      gitHost: 'github.example.com',
      redirectUri: 'https://berth.example.com/v1/integrations/git/github/callback',
    },
    gitlab: {
      clientId: 'gl-id',
      clientSecret: 'gl-secret',
      authorizeUrl: 'https://gitlab.example.com:8443/oauth/authorize',
      tokenUrl: 'https://gitlab.example.com:8443/oauth/token',
      apiBaseUrl: 'https://gitlab-api.example.com/api/v4',
      revokeUrl: 'https://gitlab.example.com:8443/oauth/revoke',
      gitHost: 'gitlab.example.com:8443',
      scopes: ['read_user', 'read_repository'],
      redirectUri: 'https://berth.example.com/v1/integrations/git/gitlab/callback',
    },
  })
  expect(c.chatProvider).toEqual({
    clientId: 'c-id',
    clientSecret: 'c-secret',
    authorizeUrl: 'https://chat.example.com/oauth/v2/authorize',
    tokenUrl: 'https://chat.example.com/api/oauth.v2.access',
    apiBaseUrl: 'https://chat.example.com/api',
    redirectUri: 'https://berth.example.com/api/chatprovider/callback',
  })
  expect(c.mailProvider).toBeUndefined()
  expect(c.bankProvider).toEqual({})
  expect(c.messenger).toEqual({ apiBaseUrl: 'https://bots.example.com', publicUrl: 'https://berth.example.com' })
  expect(() =>
    configFromEnv({
      BERTH_BITBUCKET_CLIENT_ID: 'b',
      BERTH_BITBUCKET_CLIENT_SECRET: 's',
      BERTH_BITBUCKET_URL: 'https://bitbucket.example.com',
    }),
  ).toThrow('BERTH_BITBUCKET_URL is not supported: set BERTH_BITBUCKET_AUTHORIZE_URL, _TOKEN_URL and _API_URL instead')
  const pemDir = mkdtempSync(join(tmpdir(), 'berth-config-'))
  onTestFinished(() => rmSync(pemDir, { recursive: true, force: true }))
  const pem = join(pemDir, 'client.pem')
  writeFileSync(pem, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n')
  expect(() => configFromEnv({ BERTH_BANK_CERT_FILE: pem })).toThrow(
    'BERTH_BANK_CERT_FILE is set but BERTH_BANK_KEY_FILE (bank.keyFile) is not',
  )
  expect(() => configFromEnv({ BERTH_BANK_CA_FILE: pem })).toThrow(
    'BERTH_BANK_CA_FILE needs BERTH_BANK_CERT_FILE (bank.certFile) and BERTH_BANK_KEY_FILE (bank.keyFile)',
  )
  expect(configFromEnv({ BERTH_BANK_CERT_FILE: pem, BERTH_BANK_KEY_FILE: pem }).bankProvider.clientCertificate).toEqual(
    { cert: readFileSync(pem, 'utf8'), key: readFileSync(pem, 'utf8') },
  )
  expect(() =>
    configFromEnv({
      BERTH_GITHUB_CLIENT_ID: 'a',
      BERTH_GITHUB_CLIENT_SECRET: 'b',
      BERTH_GITHUB_CA_FILE: '/nonexistent/ca.pem',
    }),
  ).toThrow(/BERTH_GITHUB_CA_FILE: cannot read "\/nonexistent\/ca.pem" \(ENOENT\)/)
})

it('reads a config file as the variables it names, the environment winning; lists and numbers become their text', () => {
  const file = {
    path: 'berth.config.json',
    values: {
      port: 8080,
      pool: { min: 1, max: 4 },
      allowPrivateWebhooks: true,
      git: { gitlab: { clientId: 'id', clientSecret: 's', scopes: ['api', 'read_user'] } },
    },
  }
  const c = configFromEnv({ BERTH_POOL_MAX: '9', PORT: '' }, file)
  expect(c).toMatchObject({
    port: 8080,
    poolMin: 1,
    poolMax: 9,
    allowPrivateWebhooks: true,
    gitProviders: { gitlab: { scopes: ['api', 'read_user'] } },
  })
  expect(() => configFromEnv({}, { path: 'berth.config.ts', values: { pool: { min: [1, 2] } } })).toThrow(
    'pool.min in berth.config.ts must be a whole number >= 0, got "1,2"',
  )
  expect(() => configFromEnv({}, { path: 'berth.config.ts', values: { pool: { min: { x: 1 } } } })).toThrow(
    'berth.config.ts: unknown setting "pool.min.x"',
  )
  expect(() => configFromEnv({}, { path: 'berth.config.ts', values: { storage: 'redis' } })).toThrow(
    'storage in berth.config.ts=redis needs BERTH_REDIS_URL (redisUrl)',
  )
})

it("the README's Configuration table lists every setting with its config file key", () => {
  const readme = readFileSync(fileURLToPath(new URL('../../../README.md', import.meta.url)), 'utf8')
  const section = readme.slice(
    readme.indexOf('## Configuration'),
    readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1),
  )
  const rows = section.split('\n').filter((l) => l.startsWith('| `'))
  for (const [name, key] of Object.entries(SETTINGS)) {
    // Git rows are written once for the three providers: BERTH_<GIT>_… and git.<git>.….
    const pattern = (s: string) =>
      s
        .replace(/^BERTH_(GITHUB|GITLAB|BITBUCKET)_/, 'BERTH_<GIT>_')
        .replace(/^git\.(github|gitlab|bitbucket)\./, 'git.<git>.')
    const row = rows.find(
      (r) =>
        (r.includes(`\`${name}\``) || r.includes(`\`${pattern(name)}\``)) &&
        (r.includes(`\`${key}\``) || r.includes(`\`${pattern(key)}\``)),
    )
    expect(row, `${name} / ${key}`).toBeDefined()
  }
})

it('reads the limits on schedules (a minute between runs, 20 per caller by default; 0: none), refusing a floor over a day', () => {
  expect(configFromEnv({}).schedules).toEqual({ minIntervalS: 60, maxPerCaller: 20 })
  expect(configFromEnv({ BERTH_SCHEDULE_MIN_INTERVAL_S: '0', BERTH_SCHEDULE_MAX_PER_CALLER: '0' }).schedules).toEqual({
    minIntervalS: 0,
    maxPerCaller: null,
  })
  const file = { path: 'berth.config.json', values: { schedules: { minInterval: 3600, maxPerCaller: 5 } } }
  expect(configFromEnv({}, file).schedules).toEqual({ minIntervalS: 3600, maxPerCaller: 5 })
  expect(() => configFromEnv({ BERTH_SCHEDULE_MIN_INTERVAL_S: '86401' })).toThrow(/BERTH_SCHEDULE_MIN_INTERVAL_S/)
  expect(() => configFromEnv({ BERTH_SCHEDULE_MAX_PER_CALLER: '-1' })).toThrow(/BERTH_SCHEDULE_MAX_PER_CALLER/)
})

it('reads BERTH_POOL_NAME (unset: derived from the data dir at start), refusing names a label cannot carry', () => {
  expect(configFromEnv({}).poolName).toBeUndefined()
  expect(configFromEnv({ BERTH_POOL_NAME: 'team-a.pool_1' }).poolName).toBe('team-a.pool_1')
  for (const bad of ['-lead', 'has space', 'a/b', 'x'.repeat(64)]) {
    expect(() => configFromEnv({ BERTH_POOL_NAME: bad })).toThrow(/BERTH_POOL_NAME/)
  }
})

it('reads BERTH_INSTANCE_ID (unset: host and pool name at start) and BERTH_REDIS_PREFIX (default berth:), refusing what a Redis member or key cannot carry', () => {
  expect(configFromEnv({})).toMatchObject({ instanceId: undefined, redisPrefix: 'berth:' })
  expect(configFromEnv({ BERTH_INSTANCE_ID: 'web-1.eu:a', BERTH_REDIS_PREFIX: 'prod:' })).toMatchObject({
    instanceId: 'web-1.eu:a',
    redisPrefix: 'prod:',
  })
  for (const bad of ['-lead', 'has space', 'a/b', 'x'.repeat(129)])
    expect(() => configFromEnv({ BERTH_INSTANCE_ID: bad })).toThrow(/BERTH_INSTANCE_ID/)
  expect(() => configFromEnv({ BERTH_REDIS_PREFIX: 'has space' })).toThrow(/BERTH_REDIS_PREFIX/)
})

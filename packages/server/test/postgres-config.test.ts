import { configFromEnv } from '@berth/server'
import { expect, it } from 'vitest'

it('BERTH_STORAGE=postgres reads BERTH_DATABASE_URL and its CA file', () => {
  const config = configFromEnv({
    BERTH_STORAGE: 'postgres',
    BERTH_DATABASE_URL: 'postgres://berth:secret@db.internal:5432/berth?sslmode=verify-full',
    BERTH_DATABASE_CA_FILE: '/etc/berth/db-ca.pem',
  })
  expect(config.storage).toBe('postgres')
  expect(config.databaseUrl).toBe('postgres://berth:secret@db.internal:5432/berth?sslmode=verify-full')
  expect(config.databaseCaFile).toBe('/etc/berth/db-ca.pem')
  // The config file's keys work the same.
  const fromFile = configFromEnv(
    {},
    { values: { storage: 'postgres', databaseUrl: 'postgresql://db/berth' }, path: 'x' },
  )
  expect(fromFile.databaseUrl).toBe('postgresql://db/berth')
})

it('BERTH_STORAGE=postgres without a database URL, or with another scheme, is refused with the setting named', () => {
  expect(() => configFromEnv({ BERTH_STORAGE: 'postgres' })).toThrow(/BERTH_STORAGE=postgres needs BERTH_DATABASE_URL/)
  expect(() => configFromEnv({ BERTH_STORAGE: 'postgres', BERTH_DATABASE_URL: 'mysql://db/berth' })).toThrow(
    /BERTH_DATABASE_URL must start with postgres:\/\//,
  )
})

import type { Sql } from 'postgres'

// Keys, index scopes, terms and orders compare as plain bytes (`COLLATE "C"`), as the port
// says and every other driver does, whatever the database's own collation is.
// Values are JSON text, not jsonb: jsonb would reorder an object's keys and refuses the
// `\u0000` escape, which agent output may hold (cast with `value::jsonb` to query them).
// `entry` is the record's index entry `{ s: scope, o: order, i: id, t: [terms] }`, the
// term '' standing for the whole scope; `berth_index` holds one row per record and term,
// `berth_index_counts` each index's size.
const RECORDS = `
CREATE TABLE IF NOT EXISTS berth_kv (
  key text COLLATE "C" PRIMARY KEY,
  value text NOT NULL,
  entry jsonb
);
CREATE TABLE IF NOT EXISTS berth_index (
  scope text COLLATE "C" NOT NULL,
  term text COLLATE "C" NOT NULL,
  ord text COLLATE "C" NOT NULL,
  id text COLLATE "C" NOT NULL,
  PRIMARY KEY (scope, term, ord, id)
);
CREATE TABLE IF NOT EXISTS berth_index_counts (
  scope text COLLATE "C" NOT NULL,
  term text COLLATE "C" NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (scope, term)
);
-- Every write is this one function: one statement, so one transaction. The advisory lock
-- serialises writers of the same key (two instances creating one key would otherwise both
-- see no old entry), and the counts change in (scope, term) order so that concurrent
-- writers of one scope never deadlock on them.
CREATE OR REPLACE FUNCTION berth_write(p_key text, p_value text, p_entry jsonb) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
  old jsonb;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
  SELECT kv.entry INTO old FROM berth_kv kv WHERE kv.key = p_key;
  IF p_value IS NULL THEN
    DELETE FROM berth_kv WHERE key = p_key;
  ELSE
    INSERT INTO berth_kv AS kv (key, value, entry) VALUES (p_key, p_value, p_entry)
      ON CONFLICT (key) DO UPDATE SET value = excluded.value, entry = excluded.entry;
  END IF;
  IF old IS NOT DISTINCT FROM p_entry THEN
    RETURN;
  END IF;
  IF old IS NOT NULL THEN
    DELETE FROM berth_index i USING jsonb_array_elements_text(old->'t') AS t(term)
      WHERE i.scope = old->>'s' AND i.term = t.term AND i.ord = old->>'o' AND i.id = old->>'i';
  END IF;
  IF p_entry IS NOT NULL THEN
    INSERT INTO berth_index (scope, term, ord, id)
      SELECT p_entry->>'s', t.term, p_entry->>'o', p_entry->>'i' FROM jsonb_array_elements_text(p_entry->'t') AS t(term);
  END IF;
  INSERT INTO berth_index_counts AS c (scope, term, n)
    SELECT d.scope, d.term, sum(d.delta) FROM (
      SELECT old->>'s' AS scope, t.term, -1 AS delta FROM jsonb_array_elements_text(old->'t') AS t(term)
      UNION ALL
      SELECT p_entry->>'s', t.term, 1 FROM jsonb_array_elements_text(p_entry->'t') AS t(term)
    ) d
    GROUP BY d.scope, d.term HAVING sum(d.delta) <> 0 ORDER BY d.scope, d.term
    ON CONFLICT (scope, term) DO UPDATE SET n = c.n + excluded.n;
END
$fn$;
`

/** The schema's versions, oldest first; each is applied once, in one transaction with its version row. */
const MIGRATIONS: readonly { version: number; name: string; sql: string }[] = [
  { version: 1, name: 'records, ordered indexes and their counts', sql: RECORDS },
]

/** The newest schema version this code knows. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version

// The first key of the two-key advisory lock that guards migrations ("BRTH"); the second
// is the schema's name hashed. Two-key locks never collide with berth_write's one-key locks.
const MIGRATION_LOCK = 0x42525448

/**
 * Bring the schema up to date: the migrations not yet in `berth_migrations` run in one
 * transaction that holds an advisory lock first, so instances starting together wait for
 * each other and each migration runs exactly once. A database already at a newer version
 * than this code knows is refused (an older Berth must not write to it).
 */
export async function migrateSchema(sql: Sql, schema: string | undefined): Promise<number[]> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK}::int, hashtext(${schema ?? ''}))`
    if (schema) await tx.unsafe(`CREATE SCHEMA IF NOT EXISTS "${schema}"`)
    await tx.unsafe(
      'CREATE TABLE IF NOT EXISTS berth_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
    )
    const done = new Set((await tx<{ version: number }[]>`SELECT version FROM berth_migrations`).map((r) => r.version))
    const newest = Math.max(0, ...done)
    if (newest > SCHEMA_VERSION)
      throw new Error(
        `the database schema is at version ${newest}, newer than this Berth knows (${SCHEMA_VERSION}): upgrade Berth`,
      )
    const applied: number[] = []
    for (const m of MIGRATIONS) {
      if (done.has(m.version)) continue
      await tx.unsafe(m.sql)
      await tx`INSERT INTO berth_migrations (version, name) VALUES (${m.version}, ${m.name})`
      applied.push(m.version)
    }
    return applied
  }) as Promise<number[]>
}

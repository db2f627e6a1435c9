/**
 * A plain-text table with right-aligned numeric columns.
 *
 * @example
 * ```ts
 * console.log(table(['target', 'req/s'], [['bare', '12,345']]))
 * ```
 */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const numeric = header.map((_, i) => rows.every((r) => /^[\d.,x%+\-–—\s]*$|^n\/a$/.test(r[i] ?? '')))
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd()
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

/** `12345.6` → `12,346`. */
export const int = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a')

/** Milliseconds with two decimals. */
export const ms = (n: number): string => (Number.isFinite(n) ? n.toFixed(2) : 'n/a')

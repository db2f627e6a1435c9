/** Who is calling: the identity every service method acts for (no dependencies, so any module may import it). */

/** An authenticated caller. `id` owns every resource the caller creates. */
export interface Caller {
  id: string
  role: 'user' | 'admin'
  /** The caller key used, when authenticated by a Berth caller key. */
  key_id?: string
}

/** What a page renders: its element and what to stop when the page is left. */
export interface View {
  el: HTMLElement
  /** Stop timers and subscriptions. */
  dispose?(): void
  /** Page title. */
  title: string
}

/**
 * Navigate within the console (hash routes: the page URL never carries credentials).
 *
 * @example
 * ```ts
 * go('#/tasks/task_1')
 * ```
 */
export function go(hash: string): void {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'))
  else location.hash = hash
}

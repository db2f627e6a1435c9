import { h } from '../../dom.js'

/**
 * A table in its scrolling frame, with a caption for screen readers and a row saying so
 * when it is empty.
 *
 * @example
 * ```ts
 * table('Users', ['Name', 'Role'], rows, 'No users yet.')
 * ```
 */
export function table(caption: string, head: string[], rows: HTMLTableRowElement[], empty: string): HTMLElement {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      null,
      h('caption', { class: 'sr-only' }, caption),
      h('thead', null, h('tr', null, ...head.map((c) => h('th', { scope: 'col' }, c)))),
      h(
        'tbody',
        null,
        ...(rows.length ? rows : [h('tr', null, h('td', { colspan: head.length, class: 'empty' }, empty))]),
      ),
    ),
  )
}

/**
 * A token shown once, with a copy button.
 *
 * @example
 * ```ts
 * notice.replaceChildren(issued('New key for Ada', key.token))
 * ```
 */
export function issued(label: string, token: string): HTMLElement {
  const input = h('input', { readonly: true, value: token, class: 'mono', 'aria-label': label, spellcheck: 'false' })
  return h(
    'div',
    { class: 'issued', role: 'status' },
    h('strong', null, label),
    h('p', { class: 'small muted' }, 'Shown once: Berth keeps only its hash.'),
    h(
      'div',
      { class: 'row' },
      input,
      h(
        'button',
        { type: 'button', onclick: () => void navigator.clipboard?.writeText(token).catch(() => input.select()) },
        'Copy',
      ),
    ),
  )
}

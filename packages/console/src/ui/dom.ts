/** A tiny DOM builder: `h('button', { class: 'x', onclick }, 'Label')`. No framework. */
export type Child = Node | string | number | null | undefined | false
export type Attrs = Record<string, string | number | boolean | null | undefined | ((e: Event) => void)>

/**
 * Create an element with attributes (`on*` keys become listeners; `false`/`null` are left
 * out) and children (strings become text nodes, falsy children are skipped).
 *
 * @example
 * ```ts
 * h('a', { href: '#/tasks' }, 'Tasks')
 * ```
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs | null = null,
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v)
      else if (k === 'value' && 'value' in el) (el as HTMLInputElement).value = String(v)
      else el.setAttribute(k, v === true ? '' : String(v))
    }
  }
  append(el, ...children)
  return el
}

/**
 * Append children (strings as text) to a node.
 *
 * @example
 * ```ts
 * append(list, h('li', null, 'one'), 'text')
 * ```
 */
export function append(el: Node, ...children: (Child | Child[])[]): void {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue
    el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c)
  }
}

/**
 * Replace every child of a node.
 *
 * @example
 * ```ts
 * replace(main, h('p', null, 'Loading…'))
 * ```
 */
export function replace(el: Node, ...children: (Child | Child[])[]): void {
  while (el.firstChild) el.removeChild(el.firstChild)
  append(el, ...children)
}

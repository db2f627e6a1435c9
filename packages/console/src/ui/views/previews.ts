import { api, describeError } from '../api.js'
import { h, replace } from '../dom.js'

interface PreviewSummary {
  id: string
  port: number
  expires_at: string
}

/**
 * Preview links of a session: open one to a port inside its container (the link, with its
 * token, is shown once, here), list the live ones, revoke any.
 *
 * @example
 * ```ts
 * aside.append(previewsPanel('ws_1'))
 * ```
 */
export function previewsPanel(workspaceId: string): HTMLElement {
  const base = `/v1/workspaces/${encodeURIComponent(workspaceId)}/previews`
  const status = h('p', { class: 'muted small', role: 'status', 'aria-live': 'polite' })
  const list = h('ul', { class: 'previews', 'aria-label': 'Preview links' })
  // Tokens are shown only in the answer that made them: kept on this page to link the list's rows.
  const urls = new Map<string, string>()

  const load = async () => {
    try {
      const { previews } = await api<{ previews: PreviewSummary[] }>(base)
      replace(list, ...previews.map(row))
      if (!previews.length) list.append(h('li', { class: 'muted small' }, 'No preview links.'))
    } catch (err) {
      replace(list, h('li', { class: 'error-text small' }, describeError(err)))
    }
  }

  const row = (p: PreviewSummary): HTMLElement => {
    const url = urls.get(p.id)
    return h(
      'li',
      { 'data-preview': p.id },
      url
        ? h('a', { href: url, target: '_blank', rel: 'noopener' }, `Port ${p.port}`)
        : h('span', null, `Port ${p.port}`),
      h('span', { class: 'muted small' }, ` until ${new Date(p.expires_at).toLocaleString()} `),
      h(
        'button',
        {
          type: 'button',
          class: 'small',
          'aria-label': `Revoke the preview of port ${p.port}`,
          onclick: async () => {
            try {
              await api(`${base}/${encodeURIComponent(p.id)}`, { method: 'DELETE' })
              urls.delete(p.id)
              status.textContent = `Revoked the preview of port ${p.port}`
            } catch (err) {
              status.textContent = describeError(err)
            }
            await load()
          },
        },
        'Revoke',
      ),
    )
  }

  const port = h('input', { type: 'number', min: 1, max: 65535, required: true, name: 'port', 'aria-label': 'Port' })
  const form = h(
    'form',
    {
      'aria-label': 'Open a preview',
      onsubmit: async (e: Event) => {
        e.preventDefault()
        try {
          const p = await api<PreviewSummary & { url: string }>(base, {
            method: 'POST',
            json: { port: Number(port.value) },
          })
          urls.set(p.id, p.url)
          status.textContent = `Preview of port ${p.port} opened: ${p.url}`
        } catch (err) {
          status.textContent = describeError(err)
        }
        await load()
      },
    },
    port,
    h('button', { type: 'submit', class: 'small' }, 'Open preview'),
  )

  void load()
  return h(
    'section',
    { class: 'card previews', 'aria-labelledby': 'previews-title' },
    h('div', { class: 'panel-head' }, h('h2', { id: 'previews-title' }, 'Previews')),
    form,
    list,
    status,
  )
}

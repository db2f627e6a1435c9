import { describeError, request, api } from '../api.js'
import { h, replace } from '../dom.js'
import { bytes } from '../format.js'
import { firstFile, save } from '../tar.js'

interface Entry {
  name: string
  type: 'file' | 'directory' | 'symlink' | 'other'
  size: number
  mtime: string
}

/**
 * The workspace's files as a tree (directories load when opened), with download (a file as
 * itself, a directory as a tar) and upload into a chosen directory.
 *
 * @example
 * ```ts
 * aside.append(filesPanel('ws_1'))
 * ```
 */
export function filesPanel(workspaceId: string): HTMLElement {
  const base = `/v1/workspaces/${encodeURIComponent(workspaceId)}`
  const status = h('p', { class: 'muted small', 'aria-live': 'polite' })
  const tree = h('ul', { class: 'tree', role: 'tree', 'aria-label': 'Workspace files' })

  const download = async (path: string, isDir: boolean) => {
    status.textContent = `Downloading ${path}…`
    try {
      const res = await request(`${base}/download?path=${encodeURIComponent(path)}`)
      const tar = new Uint8Array(await res.arrayBuffer())
      const file = isDir ? null : firstFile(tar)
      if (file) save(new Blob([file.data as Uint8Array<ArrayBuffer>]), file.name)
      else save(new Blob([tar]), `${path.split('/').pop() || 'workspace'}.tar`)
      status.textContent = `Downloaded ${path}`
    } catch (err) {
      status.textContent = `Download failed: ${describeError(err)}`
    }
  }

  const list = async (path: string, into: HTMLElement) => {
    replace(into, h('li', { class: 'muted small' }, 'Loading…'))
    try {
      const r = await api<{ entries: Entry[]; truncated: boolean }>(`${base}/files?path=${encodeURIComponent(path)}`)
      const dirs = r.entries.filter((e) => e.type === 'directory')
      const rest = r.entries.filter((e) => e.type !== 'directory')
      replace(into, ...[...dirs, ...rest].map((e) => node(path, e)))
      if (r.entries.length === 0) into.append(h('li', { class: 'muted small' }, 'Empty'))
      if (r.truncated) into.append(h('li', { class: 'muted small' }, 'More entries not shown'))
    } catch (err) {
      replace(into, h('li', { class: 'error-text small' }, describeError(err)))
    }
  }

  const node = (dir: string, e: Entry): HTMLElement => {
    const path = dir === '.' || dir === '' ? e.name : `${dir}/${e.name}`
    if (e.type === 'directory') {
      const children = h('ul', { role: 'group', hidden: true })
      const toggle = h(
        'button',
        { type: 'button', class: 'tree-toggle', 'aria-expanded': 'false' },
        h('span', { 'aria-hidden': 'true', class: 'chev' }, '▸'),
        ` ${e.name}/`,
      )
      let loaded = false
      toggle.addEventListener('click', () => {
        const open = toggle.getAttribute('aria-expanded') !== 'true'
        toggle.setAttribute('aria-expanded', String(open))
        toggle.querySelector('.chev')!.textContent = open ? '▾' : '▸'
        children.hidden = !open
        if (open && !loaded) {
          loaded = true
          void list(path, children)
        }
      })
      return h(
        'li',
        { role: 'treeitem', 'data-path': path },
        h(
          'div',
          { class: 'tree-row' },
          toggle,
          h(
            'button',
            {
              type: 'button',
              class: 'link small',
              'aria-label': `Download ${path} as tar`,
              onclick: () => download(path, true),
            },
            'tar',
          ),
        ),
        children,
      )
    }
    return h(
      'li',
      { role: 'treeitem', 'data-path': path },
      h(
        'div',
        { class: 'tree-row' },
        h('span', { class: 'file-name' }, e.name, e.type === 'symlink' ? ' →' : ''),
        h('span', { class: 'muted small num' }, bytes(e.size)),
        e.type === 'file'
          ? h(
              'button',
              {
                type: 'button',
                class: 'link small',
                'aria-label': `Download ${path}`,
                onclick: () => download(path, false),
              },
              'Download',
            )
          : null,
      ),
    )
  }

  const dirInput = h('input', { id: 'upload-dir', name: 'path', value: '.', spellcheck: 'false' })
  const fileInput = h('input', { id: 'upload-files', name: 'files', type: 'file', multiple: true })
  const upload = h(
    'form',
    { class: 'upload', 'aria-label': 'Upload files' },
    h('div', { class: 'field' }, h('label', { for: 'upload-dir' }, 'Directory'), dirInput),
    h('div', { class: 'field' }, h('label', { for: 'upload-files' }, 'Files'), fileInput),
    h('button', { type: 'submit' }, 'Upload'),
  )
  upload.addEventListener('submit', async (e) => {
    e.preventDefault()
    const files = [...(fileInput.files ?? [])]
    if (files.length === 0) {
      status.textContent = 'Choose files to upload first.'
      return
    }
    const form = new FormData()
    // The field names a folder: a trailing slash keeps a single file from being stored
    // under the folder's name itself (the upload route's one-file form).
    const dir = dirInput.value.trim() || '.'
    form.set('path', dir.endsWith('/') ? dir : `${dir}/`)
    for (const f of files) form.append('file', f, f.name)
    status.textContent = `Uploading ${files.length} file${files.length === 1 ? '' : 's'}…`
    try {
      const r = await api<{ files: { path: string }[] }>(`${base}/files`, { method: 'POST', body: form })
      status.textContent = `Uploaded ${r.files.map((f) => f.path).join(', ')}`
      fileInput.value = ''
      void list('.', tree)
    } catch (err) {
      status.textContent = `Upload failed: ${describeError(err)}`
    }
  })

  const panel = h(
    'section',
    { class: 'card files', 'aria-labelledby': 'files-title' },
    h(
      'div',
      { class: 'panel-head' },
      h('h2', { id: 'files-title' }, 'Workspace files'),
      h('button', { type: 'button', class: 'small', onclick: () => void list('.', tree) }, 'Refresh'),
    ),
    tree,
    upload,
    status,
  )
  void list('.', tree)
  return panel
}

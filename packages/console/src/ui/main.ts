/** The console's entry: layout, hash routes, sign-in guard. */
import { apiBase } from './api.js'
import { h, replace } from './dom.js'
import { resetProfiles } from './profiles.js'
import { credentials, signOut } from './session.js'
import { socket } from './socket.js'
import { adminView } from './views/admin.js'
import { playbooksView } from './views/playbooks.js'
import { sessionsView } from './views/sessions.js'
import { sessionPage } from './views/fork.js'
import { signInView } from './views/signin.js'
import { submitView } from './views/submit.js'
import { taskView } from './views/task.js'
import { tasksView } from './views/tasks.js'
import { go, type View } from './views/view.js'

const app = document.getElementById('app')!
let current: View | null = null
let offConn: (() => void) | null = null

function nav(): HTMLElement {
  const c = credentials()
  const here = location.hash.split('?')[0] || '#/tasks'
  const link = (href: string, label: string) =>
    h(
      'a',
      { href, 'aria-current': here === href || (href === '#/tasks' && here.startsWith('#/tasks/')) ? 'page' : null },
      label,
    )
  const conn = h('span', { class: 'conn', role: 'status', 'aria-label': 'Live connection' })
  offConn?.()
  offConn = socket.onState((up) => {
    conn.textContent = up ? '● live' : '○ offline'
    conn.className = `conn ${up ? 'up' : 'down'}`
  })
  return h(
    'header',
    { class: 'top' },
    h('a', { class: 'brand', href: '#/tasks' }, 'Berth'),
    h(
      'nav',
      { 'aria-label': 'Main' },
      link('#/tasks', 'Tasks'),
      link('#/sessions', 'Sessions'),
      link('#/new', 'New task'),
      link('#/playbooks', 'Playbooks'),
      c?.operator ? link('#/admin', 'Operator') : null,
    ),
    h(
      'div',
      { class: 'top-right' },
      conn,
      h('a', { href: `${apiBase()}/docs`, class: 'small' }, 'API docs'),
      h(
        'button',
        {
          type: 'button',
          class: 'small',
          onclick: () => {
            signOut()
            socket.close()
            resetProfiles()
            go('#/signin')
          },
        },
        'Sign out',
      ),
    ),
  )
}

function route(): void {
  current?.dispose?.()
  current = null
  const [path = '', qs = ''] = location.hash.replace(/^#/, '').split('?')
  const query = new URLSearchParams(qs)
  const signedIn = credentials() !== null
  let view: View
  if (!signedIn || path === '/signin') {
    view = signInView()
    replace(app, h('main', { id: 'main', class: 'bare' }, view.el))
  } else {
    const task = path.match(/^\/tasks\/([A-Za-z0-9_-]+)$/)
    if (task) view = taskView(task[1]!)
    else if (path === '/new') view = submitView()
    else if (path === '/sessions') view = sessionsView()
    else if (/^\/sessions\/ws_[A-Za-z0-9]+$/.test(path)) view = sessionPage(path.slice('/sessions/'.length))
    else if (path === '/playbooks') view = playbooksView()
    else if (path === '/admin' && credentials()?.operator) view = adminView()
    else view = tasksView(query)
    const skipToMain = (e: Event) => {
      e.preventDefault()
      document.getElementById('main')?.focus()
    }
    replace(
      app,
      h('a', { class: 'skip', href: '#main', onclick: skipToMain }, 'Skip to content'),
      nav(),
      h('main', { id: 'main', tabindex: -1 }, view.el),
    )
  }
  current = view
  document.title = `${view.title} · Berth console`
}

window.addEventListener('hashchange', route)
route()

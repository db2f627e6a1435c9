import { approvalCard, type ApprovalCard, type Decide } from './approval.js'
import { h } from './dom.js'
import { usd } from './format.js'
import type { TranscriptEvent } from './seq-stream.js'

/** Output longer than this is clipped behind "Show all". */
const CLIP_CHARS = 4000
const CLIP_LINES = 40

function clipped(text: string, cls: string): HTMLElement {
  const lines = text.split('\n')
  const long = text.length > CLIP_CHARS || lines.length > CLIP_LINES
  const pre = h('pre', { class: cls }, long ? lines.slice(0, CLIP_LINES).join('\n').slice(0, CLIP_CHARS) : text)
  if (!long) return pre
  const button = h(
    'button',
    { type: 'button', class: 'link show-all' },
    `Show all (${lines.length} lines, ${text.length} characters)`,
  )
  button.addEventListener('click', () => {
    pre.textContent = text
    button.remove()
  })
  return h('div', { class: 'clip' }, pre, button)
}

function inputPreview(input: unknown): string {
  if (input && typeof input === 'object') {
    const o = input as Record<string, unknown>
    const main = o.command ?? o.file_path ?? o.path ?? o.pattern ?? o.url ?? o.description
    if (typeof main === 'string') return main.split('\n')[0]!.slice(0, 120)
  }
  const s = JSON.stringify(input) ?? ''
  return s.length > 120 ? `${s.slice(0, 119)}…` : s
}

/** What a finished task of the conversation offers (Fork here, Rewind here), under its result. */
export type TaskActions = (taskId: string, n: number) => HTMLElement | null

/** A `background_task` event as one line: what runs in the background, and how it ended. */
function backgroundLine(e: TranscriptEvent): HTMLElement {
  const status = String(e.status)
  const end = status === 'running' ? '' : e.summary ? `: ${String(e.summary)}` : ''
  return h(
    'div',
    { class: `ev background bg-${status}`, 'data-seq': e.seq, title: String(e.kind) },
    h('span', { 'aria-hidden': 'true' }, '▸ '),
    `background: ${inputPreview({ description: e.description })} — ${status}${end}`,
  )
}

/**
 * Renders transcript events into a container as they come: text deltas append to the text
 * block they belong to (one text node, no re-render), tool calls are collapsible blocks
 * whose result fills in when it arrives, turns are separated, the result closes the run.
 * A permission request is a card with Approve and Deny (when `decide` is given) that shows
 * its outcome once decided; a message sent mid-task shows as the person's, beside the prompt.
 * Each task's events are grouped (`data-task-id`); a finished one gets `actions` under its
 * result, background work shows as one line per change. Events must come in seq order
 * (see SeqStream).
 *
 * @example
 * ```ts
 * const view = new TranscriptView(h('div'), decide)
 * view.add(events)
 * ```
 */
export class TranscriptView {
  private text: Text | null = null
  private turnEl: HTMLElement | null = null
  /** The current task's group, and every group by task id (in order: task 1, 2, …). */
  private group: HTMLElement | null = null
  private readonly groups = new Map<string, HTMLElement>()
  private readonly tools = new Map<string, HTMLElement>()
  private readonly requests = new Map<string, ApprovalCard>()
  /** Task id → what was seen of it (turns, tokens). */
  readonly seen = new Map<
    string,
    { turns: number; input: number; output: number; prompted?: boolean; result?: TranscriptEvent }
  >()

  constructor(
    readonly root: HTMLElement,
    private readonly decide?: Decide,
    private readonly actions?: TaskActions,
  ) {}

  /** The task ended: its requests still open can no longer be decided. */
  closeRequests(taskId: string): void {
    for (const card of this.requests.values()) if (card.el.dataset.taskId === taskId) card.closed()
  }

  private stats(taskId: string) {
    let s = this.seen.get(taskId)
    if (!s) {
      s = { turns: 0, input: 0, output: 0 }
      this.seen.set(taskId, s)
    }
    return s
  }

  private block(el: HTMLElement): void {
    this.text = null
    ;(this.turnEl ?? this.group ?? this.root).appendChild(el)
  }

  /** The group of a task's events: the current one, or a new one after it. */
  private enter(taskId: string): void {
    if (this.group?.dataset.taskId === taskId) return
    this.text = null
    this.turnEl = null
    let group = this.groups.get(taskId)
    if (!group) {
      group = h('div', { class: 'task-block', 'data-task-id': taskId, 'data-task-n': this.groups.size + 1 })
      this.groups.set(taskId, group)
      this.root.appendChild(group)
    }
    this.group = group
  }

  /** Render events (already in seq order, each once). */
  add(events: readonly TranscriptEvent[]): void {
    for (const e of events) this.one(e)
  }

  /** The session went back to a task: the later ones are marked, and offer nothing any more. */
  private rewind(e: TranscriptEvent): void {
    const to = this.groups.get(e.task_id)?.dataset.taskN ?? '?'
    const ids = Array.isArray(e.rewound_task_ids) ? (e.rewound_task_ids as string[]) : []
    for (const id of ids) {
      const group = this.groups.get(id)
      if (!group || group.classList.contains('rewound')) continue
      group.classList.add('rewound')
      group.prepend(h('p', { class: 'rewound-note' }, `Rewound: the session went back to task ${to}.`))
      for (const actions of group.querySelectorAll('.checkpoint-actions')) actions.remove()
    }
    this.text = null
    this.turnEl = null
    this.group = null
    this.root.appendChild(
      h(
        'div',
        { class: 'ev rewind-line', 'data-seq': e.seq },
        h('span', { 'aria-hidden': 'true' }, '↶ '),
        `Rewound to task ${to}${ids.length ? `: ${ids.length} later task${ids.length === 1 ? '' : 's'} undone` : ''}`,
      ),
    )
  }

  private one(e: TranscriptEvent): void {
    const st = this.stats(e.task_id)
    // Appended after every task: not part of the one it names.
    if (e.type === 'rewind') {
      this.rewind(e)
      return
    }
    this.enter(e.task_id)
    switch (e.type) {
      case 'user_message': {
        // The first is the task's prompt; any later one a message sent while it worked.
        const who = st.prompted ? 'Message' : 'Prompt'
        st.prompted = true
        this.turnEl = null
        this.block(
          h(
            'section',
            { class: 'ev user', 'data-seq': e.seq, 'aria-label': who },
            h('div', { class: 'who' }, who),
            h('pre', { class: 'prompt-text' }, String(e.text ?? '')),
          ),
        )
        break
      }
      case 'permission_request': {
        const card = approvalCard(e, this.decide)
        card.el.dataset.taskId = e.task_id
        this.requests.set(String(e.request_id), card)
        this.block(card.el)
        break
      }
      case 'permission_decision':
        this.requests.get(String(e.request_id))?.decided(e)
        break
      case 'turn_start': {
        st.turns = Math.max(st.turns, Number(e.turn) || 0)
        this.turnEl = null
        const turn = h(
          'section',
          { class: 'ev turn', 'data-seq': e.seq, 'aria-label': `Turn ${e.turn}` },
          h('h3', { class: 'turn-head' }, `Turn ${e.turn}`),
        )
        this.block(turn)
        this.turnEl = turn
        break
      }
      case 'token': {
        const chunk = String(e.text ?? '')
        if (!this.text) {
          this.text = document.createTextNode('')
          const div = h('div', { class: 'ev text', 'data-seq': e.seq })
          div.appendChild(this.text)
          ;(this.turnEl ?? this.group ?? this.root).appendChild(div)
        }
        this.text.appendData(chunk)
        break
      }
      case 'tool_call': {
        const id = String(e.id)
        const name = String(e.name)
        const result = h('div', { class: 'tool-result pending' }, h('span', { class: 'muted' }, 'Running…'))
        const el = h(
          'details',
          { class: 'ev tool', open: true, 'data-seq': e.seq, 'data-tool-id': id },
          h(
            'summary',
            null,
            h('span', { class: 'tool-name' }, name),
            ' ',
            h('code', { class: 'tool-preview' }, inputPreview(e.input)),
            h('span', { class: 'tool-state badge status-running' }, 'running'),
          ),
          h('div', { class: 'tool-label' }, 'Input'),
          clipped(JSON.stringify(e.input, null, 2) ?? '', 'tool-input'),
          h('div', { class: 'tool-label' }, 'Output'),
          result,
        )
        this.tools.set(id, el)
        this.block(el)
        break
      }
      case 'tool_result': {
        const el = this.tools.get(String(e.id))
        const out = clipped(String(e.output ?? ''), e.is_error ? 'tool-output error' : 'tool-output')
        if (!el) {
          this.block(h('div', { class: 'ev tool orphan', 'data-seq': e.seq }, out))
          break
        }
        const slot = el.querySelector('.tool-result')!
        slot.classList.remove('pending')
        slot.replaceChildren(out)
        const badge = el.querySelector('.tool-state')!
        badge.className = `tool-state badge ${e.is_error ? 'status-failed' : 'status-completed'}`
        badge.textContent = e.is_error ? 'error' : 'done'
        this.text = null
        break
      }
      case 'turn_end':
        st.input += Number(e.input_tokens) || 0
        st.output += Number(e.output_tokens) || 0
        ;(this.turnEl ?? this.group ?? this.root).appendChild(
          h(
            'div',
            { class: 'ev turn-end muted', 'data-seq': e.seq },
            `End of turn ${e.turn} · ${e.input_tokens ?? 0} in / ${e.output_tokens ?? 0} out tokens`,
          ),
        )
        this.text = null
        this.turnEl = null
        break
      case 'result': {
        st.result = e
        this.turnEl = null
        const ok = e.outcome === 'success'
        this.block(
          h(
            'section',
            { class: `ev result ${ok ? 'ok' : 'bad'}`, 'data-seq': e.seq, 'aria-label': 'Result' },
            h('h3', null, ok ? 'Result' : `Ended: ${String(e.outcome).replace(/_/g, ' ')}`),
            e.text ? h('pre', { class: 'result-text' }, String(e.text)) : null,
            e.structured_output !== undefined
              ? h(
                  'div',
                  { class: 'structured', 'aria-label': 'Structured output' },
                  h('div', { class: 'tool-label' }, 'Structured output'),
                  h('pre', { class: 'tool-input' }, JSON.stringify(e.structured_output, null, 2)),
                )
              : null,
            e.error ? h('p', { class: 'error-text' }, String(e.error)) : null,
            h(
              'p',
              { class: 'muted' },
              `${e.turns} turn${e.turns === 1 ? '' : 's'} · ${usd(Number(e.cost_usd))} · ${e.input_tokens ?? 0} in / ${e.output_tokens ?? 0} out tokens`,
            ),
            this.actions?.(e.task_id, Number(this.group?.dataset.taskN)),
          ),
        )
        break
      }
      case 'background_task':
        this.block(backgroundLine(e))
        break
      case 'error':
        this.turnEl = null
        this.block(
          h(
            'section',
            { class: 'ev result bad', 'data-seq': e.seq, role: 'alert' },
            h('h3', null, 'Error'),
            h('p', { class: 'error-text' }, String(e.message ?? e.error ?? '')),
          ),
        )
        break
      default:
        break
    }
  }
}

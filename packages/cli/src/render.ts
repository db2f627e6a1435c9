import type { Task, TaskEvent } from '@berth/client/node'
import { log, oneLine } from './context.js'
import { createSpinner } from './spinner.js'

/**
 * Show a running task in the terminal: the agent's text streamed to stdout as it is
 * written, tool calls and their results on stderr as they happen, a spinner while
 * nothing arrives, and at the end the status, turns, tokens and cost.
 *
 * @example
 * ```ts
 * const view = createTaskView()
 * const task = await berth.tasks.run(body, { onEvent: view.onEvent })
 * view.finish(task)
 * ```
 */
export function createTaskView(out: NodeJS.WriteStream = process.stdout) {
  const spinner = createSpinner('waiting for the agent')
  let midLine = false
  const endLine = () => {
    if (midLine) out.write('\n')
    midLine = false
  }
  spinner.start()
  return {
    onEvent(event: TaskEvent) {
      spinner.stop()
      switch (event.type) {
        case 'token':
          out.write(event.text)
          midLine = !event.text.endsWith('\n')
          break
        case 'tool_call':
          endLine()
          log.log(`▸ ${event.name} ${oneLine(JSON.stringify(event.input) ?? '', 100)}`)
          break
        case 'tool_result':
          log.log(`  ${event.is_error ? '✗' : '✓'} ${oneLine(event.output, 100)}`)
          break
        case 'permission_decision':
          // A person's decision is shown where it was made; one at the timeout shows here.
          if (event.by === 'timeout') {
            endLine()
            log.warn(`  denied: no decision in time${event.message ? ` (${event.message})` : ''}`)
          }
          break
        case 'error':
          endLine()
          log.warn(event.message)
          break
        default:
          break
      }
      // Not in the middle of the agent's text: the spinner redraws its line.
      if (!midLine) spinner.start(event.type === 'tool_call' ? 'running the tool' : 'waiting for the agent')
    },
    /** Stop the spinner and print the summary; resolves the exit status of the task. */
    finish(task: Task): boolean {
      spinner.stop()
      endLine()
      const r = task.result
      const usage = r
        ? ` · ${r.turns} turn${r.turns === 1 ? '' : 's'} · ${r.input_tokens} in / ${r.output_tokens} out tokens · $${r.cost_usd.toFixed(4)}`
        : ''
      if (task.status === 'completed') log.success(`completed${usage} · ${task.task_id}`)
      else if (task.error)
        log.error(`${task.status}: ${task.error.code}: ${task.error.error}${usage} · ${task.task_id}`)
      else log.warn(`${task.status}${usage} · ${task.task_id}`)
      return task.status === 'completed'
    },
    stop: () => spinner.stop(),
    /** Make room for a question: no spinner, a fresh line. */
    pause() {
      spinner.stop()
      endLine()
    },
    resume: () => spinner.start(),
  }
}

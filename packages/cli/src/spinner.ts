const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']

/**
 * A one-line spinner on stderr while nothing arrives; silent when stderr is not a terminal
 * (pipes and CI get no control characters).
 *
 * @example
 * ```ts
 * const spin = createSpinner('waiting for the agent')
 * spin.start(); ...; spin.stop()
 * ```
 */
export function createSpinner(label: string, stream: NodeJS.WriteStream = process.stderr) {
  let timer: ReturnType<typeof setInterval> | undefined
  let frame = 0
  let text = label
  const clear = () => stream.write('\r\x1b[2K')
  return {
    start(next = text) {
      text = next
      if (!stream.isTTY || timer) return
      timer = setInterval(() => stream.write(`\r\x1b[2K${FRAMES[frame++ % FRAMES.length]} ${text}`), 80)
      timer.unref()
    },
    stop() {
      if (!timer) return
      clearInterval(timer)
      timer = undefined
      clear()
    },
  }
}

import { closeSync, fsyncSync, mkdirSync, openSync, writeSync } from 'node:fs'
import { dirname } from 'node:path'
import type { RunnerEvent } from '@berth/contract'
import type { Redactor } from './redact.js'

/** Where the runner's events go: redacted, one JSON line each, to stdout and the events file. */
export interface EventSink {
  emit(event: RunnerEvent): void
  /** fsync and close the events file; wait until stdout took every line. */
  close(): Promise<void>
}

/**
 * Open the events file (append; directories created) and return a sink writing every
 * event, redacted, to it and to `out`. Each line is written synchronously as it comes,
 * so a crash keeps everything emitted before it; `close()` fsyncs.
 *
 * @example
 * ```ts
 * const sink = openEventSink('/workspace/.berth/events/t1.jsonl', createRedactor(['k']))
 * sink.emit({ type: 'user_message', text: 'hi' })
 * await sink.close()
 * ```
 */
export function openEventSink(
  eventsFile: string | null,
  redactor: Redactor,
  out: NodeJS.WritableStream = process.stdout,
): EventSink {
  let fd: number | null = null
  if (eventsFile) {
    mkdirSync(dirname(eventsFile), { recursive: true })
    fd = openSync(eventsFile, 'a')
  }
  return {
    emit(event) {
      // `type` is protocol, not content: never rewritten, even by an unlucky short secret.
      const line = `${JSON.stringify({ ...redactor.value(event), type: event.type })}\n`
      if (fd !== null) {
        // Whole lines or an error: a short write (a full disk) throws ENOSPC on the next try
        // rather than leaving a torn line in the file recovery reads.
        const bytes = Buffer.from(line)
        for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at)
      }
      out.write(line)
    },
    async close() {
      if (fd !== null) {
        fsyncSync(fd)
        closeSync(fd)
        fd = null
      }
      await new Promise<void>((resolve) => out.write('', () => resolve()))
    },
  }
}

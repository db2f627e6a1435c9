/** The status and event-type lists are the ones the schemas and the runner protocol use. */
import * as v from 'valibot'
import { expect, it } from 'vitest'
import {
  ACTIVE_TASK_STATUSES,
  ENDED_TASK_STATUSES,
  PlaybookRunStatus,
  RunnerEvent,
  TASK_STATUSES,
  TRANSCRIPT_EVENT_TYPES,
  TaskStatus,
  TranscriptEvent,
  isEndedStatus,
} from '../src/index.js'

it('splits the task statuses into active and ended, in order, with no status left over', () => {
  expect([...ACTIVE_TASK_STATUSES, ...ENDED_TASK_STATUSES]).toEqual([...TASK_STATUSES])
  expect(TaskStatus.options).toEqual([...TASK_STATUSES])
  expect(PlaybookRunStatus.options).toEqual([...TASK_STATUSES])
  expect(TASK_STATUSES.filter(isEndedStatus)).toEqual([...ENDED_TASK_STATUSES])
})

it('lists exactly the event types the runner writes, then Berth’s own, and a stored event must have one of them', () => {
  expect([...RunnerEvent.options.map((o) => o.entries.type.literal), 'rewind']).toEqual([...TRANSCRIPT_EVENT_TYPES])
  const at = new Date().toISOString()
  expect(v.is(TranscriptEvent, { seq: 1, at, type: 'token', task_id: 'task_1', text: 'hi' })).toBe(true)
  expect(v.is(TranscriptEvent, { seq: 2, at, type: 'rewind', task_id: 'task_1', rewound_task_ids: [] })).toBe(true)
  expect(v.is(TranscriptEvent, { seq: 1, at, type: 'thinking', task_id: 'task_1' })).toBe(false)
})

// Coordination: what several Berth instances share (queues, slots, rate buckets, single-use keys, pub/sub, delayed jobs), and its memory driver.
export type {
  Coordination,
  JobQueue,
  JobPriority,
  NewJob,
  TakenJob,
  QueueCounts,
  Slots,
  SlotLease,
  RateBuckets,
  RateSettings,
  OnceKeys,
  PubSub,
  DelayedJobs,
  DueJob,
  Instances,
  CoordinationState,
  CoordinationChange,
} from './port.js'
export { CoordinationUnavailableError } from './port.js'
export { memoryCoordination, type MemoryCoordinationOptions } from './memory.js'
export { memoryHub, type MemoryHub, type MemoryHubOptions } from './memory-hub.js'
export { rateDecision, checkRateSettings } from './rate.js'
export { queueRank, checkQueueName } from './order.js'

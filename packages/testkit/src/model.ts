/**
 * `@berth/testkit/model`: the offline model, re-exported from `@berth/stub-model` so tests
 * keep one import for every fake. No vitest here.
 */
export * from '@berth/stub-model'

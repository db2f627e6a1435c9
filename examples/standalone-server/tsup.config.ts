import { defineConfig } from 'tsup'

/**
 * Plain JavaScript for the server image (`node dist/main.js`): one file per source file,
 * not bundled, so `telemetry.js` is still imported (and the OpenTelemetry SDK registered)
 * before `@berth/server` loads, and every dependency stays an ordinary import.
 */
export default defineConfig({
  entry: ['src/*.ts'],
  format: ['esm'],
  bundle: false,
  clean: true,
  target: 'node20',
})

#!/usr/bin/env node
// The `berth-runner` command. A committed shim, so pnpm can link the bin on a fresh clone
// before `dist` is built; the program itself is dist/main.js.
import '../dist/main.js'

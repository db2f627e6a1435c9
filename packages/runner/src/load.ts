#!/usr/bin/env node
/**
 * `berth-runner`'s entry (`dist/main.js`): loads the runner program (`runner.cjs`, see
 * main.ts for what it does) with V8's code cache when the bundle has one.
 * `berth-runner --code-cache` writes that cache for the Node running it, and exits.
 */
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { runProgram, writeCodeCache } from './program.js'

const dir = dirname(fileURLToPath(import.meta.url))
if (process.argv[2] === '--code-cache') writeCodeCache(dir)
else runProgram(dir)

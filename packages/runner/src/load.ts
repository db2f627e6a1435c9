#!/usr/bin/env node
/**
 * `berth-runner`'s entry (`dist/main.js`): loads the runner program (`runner.cjs`, see
 * main.ts for what it does) with V8's code cache when the bundle has one.
 */
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { runProgram } from './program.js'

runProgram(dirname(fileURLToPath(import.meta.url)))

export { runtimeConformanceSuite, type ConformanceOptions } from './conformance.js'
export { ensureEngines, readEngine, findRepoRoot, ENSURE_SCRIPT, type EngineInfo } from './engines.js'
export { packTar, readTar, type TarInput, type TarEntry } from './tar.js'
export { busyboxRecipe } from './image-recipe.js'

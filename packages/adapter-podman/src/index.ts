export { podmanRuntime, type PodmanRuntimeOptions } from './podman-runtime.js'
export { discoverPodman, parseEngineUrl, ROOTFUL_SOCKET, type PodmanEndpoint, type DiscoveryEnv } from './discovery.js'
export { isQualifiedImage, localImageName, podmanImageResolver } from './image-names.js'
export { slashDirectoryNames } from './archive-names.js'

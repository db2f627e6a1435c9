/** transport/: where HTTP and WebSocket traffic meets the services — the request pipeline (auth, rate limits, body limits, JSON and error responses) and the task WebSocket session. */
export { json, errorResponse } from './response.js'
export { bearerToken, createAuthenticate, type Authenticate, type AuthenticateOptions } from './auth.js'
export { createPipeline, type Pipeline, type PipelineOptions } from './pipeline.js'
export { createTaskSocket, type TaskSocketOptions } from './socket.js'

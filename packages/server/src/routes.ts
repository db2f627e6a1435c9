import { buildOpenApi, defineRoute, routes as coreRoutes, type AnyRoute } from '@berth/core'
import { createHash } from 'node:crypto'
import { cachedResponse, docsAsset, docsPage } from './docs.js'
import { VERSION } from './version.js'

const DESCRIPTION =
  'Berth runs AI-agent tasks in containers: submit tasks, keep workspaces, manage profiles, credentials, memory, secrets, tools, skills and agents. Try it from `/docs`.'

let served: { body: string; etag: string } | undefined

/** The document of the whole mounted table, built on first request (the table never changes). */
function openApiBody(): { body: string; etag: string } {
  if (!served) {
    const body = JSON.stringify(
      buildOpenApi([...coreRoutes, ...serverRoutes], { title: 'Berth', version: VERSION, description: DESCRIPTION }),
    )
    served = { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` }
  }
  return served
}

export const openApiJson = defineRoute({
  name: 'openapi',
  method: 'GET',
  path: '/openapi.json',
  auth: 'public',
  tag: 'system',
  summary: 'This API as an OpenAPI 3.1 document',
  description: 'Generated from the route table the server mounts, so it always matches what the server answers.',
  unlimited: true,
  produces: 'application/json',
  handle: ({ request }) => {
    const { body, etag } = openApiBody()
    return cachedResponse(request, body, etag, {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-cache',
    })
  },
})

/** Routes only the server can answer (documents served from its own assets). */
export const serverRoutes: readonly AnyRoute[] = [openApiJson, docsPage, docsAsset]

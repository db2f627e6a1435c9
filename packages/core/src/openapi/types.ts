/** The shapes of the OpenAPI 3.1 document Berth generates, and the options of `buildOpenApi`. */
import type * as v from 'valibot'
import type { JsonSchema } from '@valibot/to-json-schema'
import type { HttpMethod } from '../route.js'

/** A JSON Schema as it appears in the document. */
export type OpenApiSchema = JsonSchema

export interface OpenApiParameter {
  name: string
  in: 'path' | 'query'
  required: boolean
  description?: string
  schema: OpenApiSchema
  style?: 'form' | 'simple'
  explode?: boolean
}

export interface OpenApiMediaType {
  schema?: OpenApiSchema
  examples?: Record<string, { summary?: string; value: unknown }>
}

export interface OpenApiResponse {
  description: string
  headers?: Record<string, { $ref: string } | { description: string; schema: OpenApiSchema }>
  content?: Record<string, OpenApiMediaType>
}

export interface OpenApiOperation {
  operationId: string
  tags: string[]
  summary: string
  description?: string
  security: Array<Record<string, string[]>>
  parameters?: OpenApiParameter[]
  requestBody?: { required: boolean; description?: string; content: Record<string, OpenApiMediaType> }
  responses: Record<string, OpenApiResponse>
  /** The messages of a WebSocket route, each side one JSON Schema (a union of its message types). */
  'x-websocket'?: { client_messages: OpenApiSchema; server_messages: OpenApiSchema }
}

/** An OpenAPI 3.1.0 document as `buildOpenApi` produces it. */
export interface OpenApiDocument {
  openapi: '3.1.0'
  info: { title: string; version: string; description: string }
  tags: Array<{ name: string }>
  paths: Record<string, Partial<Record<Lowercase<HttpMethod>, OpenApiOperation>>>
  components: {
    schemas: Record<string, OpenApiSchema>
    securitySchemes: Record<string, { type: 'http'; scheme: 'bearer'; description: string }>
    headers: Record<string, { description: string; schema: OpenApiSchema }>
  }
}

/** `title` and `version` of the document; `description` is put before the error model text. */
export interface OpenApiInfo {
  title: string
  version: string
  description?: string
}

export interface OpenApiOptions {
  /**
   * Named schemas to publish under `components.schemas` and reference with `$ref` wherever a
   * route uses that very schema object. Default: every object, variant and enum schema
   * exported by core's `schemas/` (`ErrorBodySchema` is published as `ErrorBody`).
   */
  schemas?: Record<string, v.GenericSchema>
}

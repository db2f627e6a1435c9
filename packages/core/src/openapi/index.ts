/** openapi/: the OpenAPI 3.1 document generated from the route table — document assembly, schema conversion, the request (paths) and response sides. */
export { buildOpenApi } from './document.js'
export { defaultSchemaComponents, ANY_VALUE_DESCRIPTION } from './schemas.js'
export { toOpenApiPath } from './paths.js'
export type {
  OpenApiSchema,
  OpenApiParameter,
  OpenApiMediaType,
  OpenApiResponse,
  OpenApiOperation,
  OpenApiDocument,
  OpenApiInfo,
  OpenApiOptions,
} from './types.js'

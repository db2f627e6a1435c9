import * as v from 'valibot'
import { Id, Timestamp } from './common.js'

/** A TCP port inside the container: 1–65535. */
const Port = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))

/** Body of `POST /v1/workspaces/:id/previews`. */
export const CreatePreview = v.strictObject({
  port: v.pipe(Port, v.description('The port inside the session container, 1-65535.')),
  ttl_s: v.optional(
    v.pipe(
      v.number(),
      v.integer(),
      v.minValue(1),
      v.description("Seconds until the link expires (the server's default when omitted; at most its cap)."),
    ),
  ),
})

/** A preview link as listed: never its token, which only the creating answer carries. */
export const PreviewSummary = v.object({
  id: Id('preview'),
  workspace_id: Id('workspace'),
  port: Port,
  expires_at: Timestamp,
  created_at: Timestamp,
})

/** `POST /v1/workspaces/:id/previews`: the link with its token, shown once. */
export const Preview = v.object({
  ...PreviewSummary.entries,
  /** `<public URL>/preview/<token>/`: anyone holding it reaches the port until it expires or is revoked. */
  url: v.string(),
})

export type CreatePreview = v.InferOutput<typeof CreatePreview>
export type PreviewSummary = v.InferOutput<typeof PreviewSummary>
export type Preview = v.InferOutput<typeof Preview>

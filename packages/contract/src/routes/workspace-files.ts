import * as v from 'valibot'
import { maxLength } from '../schemas/length.js'
import { defineRoute } from '../route.js'
import { IdParams, Timestamp } from '../schemas/common.js'

const Path = v.pipe(v.string(), maxLength(4096))
const Size = v.pipe(v.number(), v.integer(), v.minValue(0))

/** One entry of a directory listing. */
export const FileEntry = v.object({
  name: v.string(),
  /** `other`: a device, FIFO or socket. */
  type: v.picklist(['file', 'directory', 'symlink', 'other']),
  size: Size,
  mtime: Timestamp,
})

/** `GET /v1/workspaces/:id/files`. */
export const FileListing = v.object({
  path: v.string(),
  entries: v.array(FileEntry),
  truncated: v.boolean(),
})

/** `POST /v1/workspaces/:id/files`. */
export const UploadResult = v.object({
  path: v.string(),
  files: v.array(v.object({ name: v.string(), path: v.string(), size: Size })),
})

const PATH_RULES =
  'Paths are absolute under `/workspace` or relative to it. `..` segments, NUL bytes, paths elsewhere and paths whose symlinks resolve outside `/workspace` (checked inside the container) are 400 VALIDATION_FAILED naming `path`; nothing outside is ever read or written.'
const WHERE =
  "Files come from the workspace's container while it is warm. Once the container is released (a batch task's when it ends), a workspace with persistent sessions is served from its volume, and one without from a copy of `/workspace` taken at release, both through a short-lived helper container. The copy is kept until the workspace is deleted or the server's retention expires (7 days by default, `workspaceFiles.retentionMs`; workspaces over `workspaceFiles.maxBytes`, 50 MiB by default, are not kept); without one the answer is 400 VALIDATION_FAILED (issue on `id`)."

export const workspaceFileRoutes = [
  defineRoute({
    name: 'workspaces.files.list',
    method: 'GET',
    path: '/v1/workspaces/:id/files',
    auth: 'caller',
    tag: 'workspaces',
    summary: 'List a directory of the workspace: name, type, size and mtime of each entry',
    description: `\`path\` is the directory (default \`/workspace\`). Entries are sorted by name; at most 10,000 are listed (\`truncated\` says when there were more). Symlinks are listed as such, not followed. A path that does not exist or is not a directory is 400. ${PATH_RULES} ${WHERE}`,
    params: IdParams('workspace'),
    query: v.object({
      path: v.optional(v.pipe(Path, v.description('The directory to list (default /workspace).')), ''),
    }),
    response: FileListing,
    errors: ['CONTAINER_FAILED'],
  }),
  defineRoute({
    name: 'workspaces.files.upload',
    method: 'POST',
    path: '/v1/workspaces/:id/files',
    auth: 'caller',
    tag: 'workspaces',
    summary: 'Upload files into a directory of the workspace (multipart)',
    description: `A \`multipart/form-data\` body: a \`path\` field and one or more file parts (any field name; each part's filename is the file name). With one file and a \`path\` that is not an existing directory and does not end in \`/\`, the file is stored at \`/workspace/<path>\` (its directory created when missing). Otherwise \`path\` is a directory (created when missing) and each file is stored at \`/workspace/<path>/<filename>\`. Either way a file of that name is replaced. The whole body may be at most the server's upload limit (100 MiB by default, \`uploadLimit\`): beyond it the answer is 413 PAYLOAD_TOO_LARGE and nothing is stored. Files are staged inside the workspace while the body streams in and moved into place only once it was read completely. File names must be plain names (no \`/\`, no control or bidirectional formatting characters such as U+202E), and neither \`path\` nor a file name may make a directory with such characters or write into \`/workspace/.berth\` (Berth's own) or \`/workspace/lost+found\` (400). ${PATH_RULES} ${WHERE}`,
    params: IdParams('workspace'),
    multipart: {
      fields: {
        path: 'The directory under /workspace to store the files in (`.` or `/workspace` for the workspace itself).',
      },
      files: 'The files; each part with a filename is one file, stored under that name.',
    },
    response: UploadResult,
    status: 201,
    // 413 is the upload limit's (multipart bodies are not JSON bodies, which imply it).
    errors: ['PAYLOAD_TOO_LARGE', 'CONTAINER_FAILED'],
  }),
  defineRoute({
    name: 'workspaces.files.download',
    method: 'GET',
    path: '/v1/workspaces/:id/download',
    auth: 'caller',
    tag: 'workspaces',
    summary: 'Download files and directories of the workspace as a tar archive',
    description: `Repeat \`path\` for each file or directory to include (1 to 100; at least one is required). The tar is streamed as it is read from the container; entry names are relative to \`/workspace\` (\`path=src/app\` gives \`src/app/...\`, \`path=/workspace\` gives \`./...\`). Symlinks inside are archived as links, never followed. ${PATH_RULES} ${WHERE}`,
    params: IdParams('workspace'),
    // Optional in the schema so that ownership (404) is answered before the input is judged.
    query: v.object({
      path: v.optional(
        v.pipe(
          v.array(Path),
          maxLength(100),
          v.description('A file or directory to include; repeat for several (1 to 100 required).'),
        ),
        [],
      ),
    }),
    produces: 'application/x-tar',
    errors: ['CONTAINER_FAILED'],
  }),
] as const

import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'

/** One tool of the fake server: its description and what a call answers (text). */
export interface FakeMcpTool {
  description: string
  call(args: Record<string, unknown>): string | Promise<string>
}

/** Options of {@link startFakeMcpServer}. */
export interface FakeMcpServerOptions {
  /** TLS key and certificate (see `selfSignedCert`); clients trust `cert` as their CA. */
  tls: { key: string; cert: string }
  /** The bearer token every request must carry in `Authorization: Bearer <token>`; others get a 401. */
  token: string
  /** The tools it offers (default: `echo`, which answers `echo: <text>`). */
  tools?: Record<string, FakeMcpTool>
  /** Listen address (default `127.0.0.1`; a container reaching the host needs another of its addresses). */
  host?: string
  port?: number
}

/** One HTTP request the fake MCP server received. */
export interface FakeMcpRequest {
  method: string
  path: string
  /** The `Authorization` header exactly as it came, or null. */
  authorization: string | null
  /** The JSON-RPC methods of a POST body (`initialize`, `tools/list`, `tools/call`, …). */
  rpc: string[]
  status: number
}

/** A running fake remote MCP server. */
export interface FakeMcpServer {
  /** `https://<host>:<port>/mcp`, the URL a profile's `mcp_servers` entry names. */
  url: string
  port: number
  requests: FakeMcpRequest[]
  /** The arguments of every `tools/call`, in order. */
  calls: { tool: string; args: Record<string, unknown> }[]
  close(): Promise<void>
}

const ECHO: Record<string, FakeMcpTool> = {
  echo: { description: 'Answers with the text it was given', call: (args) => `echo: ${String(args.text ?? '')}` },
}

/**
 * A remote MCP server over HTTPS (the streamable HTTP transport of
 * `@modelcontextprotocol/sdk`, stateless, JSON answers) that requires a bearer token, as
 * hosted MCP servers do, and records every request with the `Authorization` it carried.
 *
 * @example
 * ```ts
 * const mcp = await startFakeMcpServer({ tls: selfSignedCert({ ips: ['127.0.0.1'] }), token: 's3cret' })
 * // profile: mcp_servers: { docs: { type: 'http', url: mcp.url, headers: { Authorization: 'Bearer s3cret' } } }
 * mcp.calls // [{ tool: 'echo', args: { text: 'hi' } }]
 * ```
 */
export async function startFakeMcpServer(opts: FakeMcpServerOptions): Promise<FakeMcpServer> {
  const tools = opts.tools ?? ECHO
  const requests: FakeMcpRequest[] = []
  const calls: FakeMcpServer['calls'] = []

  function mcpServer(): Server {
    const server = new Server({ name: 'berth-fake-mcp', version: '1.0.0' }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: Object.entries(tools).map(([name, t]) => ({
        name,
        description: t.description,
        inputSchema: { type: 'object' as const, properties: { text: { type: 'string' } } },
      })),
    }))
    server.setRequestHandler(CallToolRequestSchema, async (req) => {
      const tool = tools[req.params.name]
      const args = req.params.arguments ?? {}
      calls.push({ tool: req.params.name, args })
      if (!tool) return { content: [{ type: 'text', text: `no tool ${req.params.name}` }], isError: true }
      return { content: [{ type: 'text', text: await tool.call(args) }] }
    })
    return server
  }

  async function handle(req: IncomingMessage, res: ServerResponse, rec: FakeMcpRequest): Promise<void> {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const text = Buffer.concat(chunks).toString('utf8')
    let body: unknown
    try {
      body = text ? JSON.parse(text) : undefined
      rec.rpc = (Array.isArray(body) ? body : [body]).flatMap((m) =>
        m && typeof m === 'object' && typeof m.method === 'string' ? [m.method] : [],
      )
    } catch {
      body = undefined
    }
    if (rec.authorization !== `Bearer ${opts.token}`) {
      res.writeHead(401, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: 'invalid_token' }))
      return
    }
    // Stateless: no stream for server-initiated messages, no session to end.
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' }).end()
      return
    }
    // A fresh server and transport per request, as the SDK's stateless mode requires.
    const server = mcpServer()
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
    res.on('close', () => {
      void transport.close()
      void server.close()
    })
    await server.connect(transport)
    await transport.handleRequest(req, res, body)
  }

  const https = createServer({ key: opts.tls.key, cert: opts.tls.cert }, (req, res) => {
    const rec: FakeMcpRequest = {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      authorization: req.headers.authorization ?? null,
      rpc: [],
      status: 0,
    }
    requests.push(rec)
    res.on('finish', () => {
      rec.status = res.statusCode
    })
    handle(req, res, rec).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' })
      res.end(String(err))
    })
  })
  const host = opts.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    https.once('error', reject)
    https.listen(opts.port ?? 0, host, () => resolve())
  })
  const port = (https.address() as AddressInfo).port
  return {
    url: `https://${host.includes(':') ? `[${host}]` : host}:${port}/mcp`,
    port,
    requests,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        https.closeAllConnections()
        https.close(() => resolve())
      }),
  }
}

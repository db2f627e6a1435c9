import type { RunnerInput } from '@berth/contract'

/**
 * Variables that choose or authenticate Claude Code's model provider. The runner clears
 * them all before setting the run's own, so a task's `env` cannot send the agent to
 * another provider or endpoint than its credential's.
 */
export const PROVIDER_VARIABLES = [
  'ANTHROPIC_BASE_URL',
  'ANTHROPIC_API_KEY',
  'ANTHROPIC_AUTH_TOKEN',
  'CLAUDE_CODE_OAUTH_TOKEN',
  'CLAUDE_CODE_USE_BEDROCK',
  'CLAUDE_CODE_USE_VERTEX',
  'CLAUDE_CODE_USE_FOUNDRY',
  'ANTHROPIC_BEDROCK_BASE_URL',
  'ANTHROPIC_VERTEX_BASE_URL',
  'CLAUDE_CODE_SKIP_BEDROCK_AUTH',
  'CLAUDE_CODE_SKIP_VERTEX_AUTH',
  'AWS_BEARER_TOKEN_BEDROCK',
  'ANTHROPIC_VERTEX_PROJECT_ID',
  'CLOUD_ML_REGION',
]

/**
 * Claude Code's environment for reaching its model through the broker's gateway at
 * `gatewayUrl` with the run's capability `token`. `anthropic`: the gateway is the API's
 * base URL and the token its key. `bedrock` and `vertex`: Claude Code speaks the
 * provider's own protocol to the gateway (its Bedrock or Vertex client, with signing and
 * Google sign-in skipped: the gateway signs) and sends the token as a bearer header.
 *
 * @example
 * ```ts
 * gatewayEnv({ provider: 'bedrock', model: null, base_url: null, api_key: null, region: 'us-east-1' }, url, token)
 * // { CLAUDE_CODE_USE_BEDROCK: '1', ANTHROPIC_BEDROCK_BASE_URL: url, CLAUDE_CODE_SKIP_BEDROCK_AUTH: '1', ... }
 * ```
 */
export function gatewayEnv(model: RunnerInput['model'], gatewayUrl: string, token: string): Record<string, string> {
  const bearer = `Authorization: Bearer ${token}`
  if (model.provider === 'bedrock') {
    return {
      CLAUDE_CODE_USE_BEDROCK: '1',
      ANTHROPIC_BEDROCK_BASE_URL: gatewayUrl,
      CLAUDE_CODE_SKIP_BEDROCK_AUTH: '1',
      AWS_REGION: model.region ?? 'us-east-1',
      ANTHROPIC_CUSTOM_HEADERS: bearer,
    }
  }
  if (model.provider === 'vertex') {
    return {
      CLAUDE_CODE_USE_VERTEX: '1',
      // Vertex's base URL carries the API version; the client appends /projects/<p>/locations/<r>/…
      ANTHROPIC_VERTEX_BASE_URL: `${gatewayUrl}/v1`,
      CLAUDE_CODE_SKIP_VERTEX_AUTH: '1',
      ANTHROPIC_VERTEX_PROJECT_ID: model.project_id ?? 'berth',
      CLOUD_ML_REGION: model.region ?? 'global',
      ANTHROPIC_CUSTOM_HEADERS: bearer,
    }
  }
  return { ANTHROPIC_BASE_URL: gatewayUrl, ANTHROPIC_API_KEY: token }
}

/** The OAuth-connected integration types (chat workspace, mail provider): their provider port and what each type is. */
import type { OAuthClient } from '../ports/oauth-client.js'
import { CONNECT_TYPES, type ConnectType } from '@berth/contract'

/**
 * One OAuth-connected integration provider (the chat workspace or the mail provider): its
 * OAuth client and how to learn which account a token belongs to. Built by the server from
 * `createBerth({ chatProvider, mailProvider })`.
 */
export interface ConnectProvider {
  oauth: OAuthClient
  /**
   * The account a token belongs to, as the config fields the flow owns: `team_id`,
   * `team_name`, `bot_user_id` (chat); `account_id`, `email` (mail). Throws a `ProviderError` of `oauth`.
   */
  account(accessToken: string): Promise<Record<string, string>>
  /** A fixed OAuth redirect URI; default: `/api/<type>/callback` on the authorize request's origin. */
  redirectUri?: string | undefined
}

export type Config = Record<string, unknown>

export interface TypeInfo {
  label: string
  /** The `createBerth` option that configures it. */
  option: string
  /** The account field that identifies a connection: connecting the same account again updates it. */
  key: string
  /** The caller-editable config a new connection starts with. */
  initial: (account: Record<string, string>) => Config
}

export const TYPES: Record<ConnectType, TypeInfo> = {
  chatprovider: { label: 'chat provider', option: 'chatProvider', key: 'team_id', initial: () => ({ channel: null }) },
  mailprovider: {
    label: 'mail provider',
    option: 'mailProvider',
    key: 'account_id',
    initial: (a) => ({ recipients: [a.email] }),
  },
}

/** Why a type cannot be used: the server has no provider for it. */
export const notConfigured = (type: ConnectType) =>
  `has no ${TYPES[type].label} configured (createBerth({ ${TYPES[type].option} }))`

/**
 * True for `chatprovider` and `mailprovider`.
 *
 * @example
 * ```ts
 * isConnectType('mailprovider') // true
 * isConnectType('webhook') // false
 * ```
 */
export function isConnectType(type: string): type is ConnectType {
  return (CONNECT_TYPES as readonly string[]).includes(type)
}

export const message = (err: unknown) => (err instanceof Error ? err.message : String(err))
